"""One loaded module called from several Python threads at once (a web server's pattern): every
call gets its own input's answer, and with a thread pool of its own the process does not crash.
The binding serializes calls on a module (one arena per loaded program; ctypes drops the GIL while
the C call runs); docs/runtime-c-api.md says what is safe in C."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import openaccel as oa


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32 * 16 * 16, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


@pytest.fixture(scope="module")
def program() -> oa.Program:
    torch.manual_seed(0)
    return oa.export(Net().eval(), (torch.randn(1, 8, 16, 16),))


@pytest.mark.parametrize("threads", [1, 2])
def test_module_called_from_four_threads(program: oa.Program, threads: int) -> None:
    mod = oa.load(program, threads=threads)
    inputs = [np.random.default_rng(i).standard_normal((1, 8, 16, 16)).astype(np.float32) for i in range(4)]
    want = [mod(x)[0].numpy() for x in inputs]
    assert not np.allclose(want[0], want[1])  # distinct answers, so a mix-up shows
    errors: list[str] = []
    start = threading.Barrier(4)

    def worker(i: int) -> None:
        start.wait()
        for k in range(60):
            (got,) = mod(inputs[i])
            if not np.array_equal(got.numpy(), want[i]):
                errors.append(f"thread {i}, call {k}: another call's answer")
                return
            if k % 20 == 0 and not mod.run_bundled_tests().ok:  # the bundled test shares the arena too
                errors.append(f"thread {i}, call {k}: the bundled test failed")
                return

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors
