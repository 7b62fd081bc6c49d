/* JSON string output shared by the command-line tools (oa_run, oa_conformance). */
#ifndef OA_TOOLS_JSON_OUT_H
#define OA_TOOLS_JSON_OUT_H

#include <stdio.h>

/* `s` as a quoted JSON string (NULL as ""), control characters escaped. */
void json_string(FILE *f, const char *s);

#endif /* OA_TOOLS_JSON_OUT_H */
