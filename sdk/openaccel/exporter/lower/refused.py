"""Ops refused on purpose, with the reason the export error and docs/ops.md give. Family modules
declare their own refusals beside their rules; the ones that belong to no family live here."""

from __future__ import annotations

from . import refuse

refuse("aten.rand.default", "aten.randn.default", "aten.randperm.default", "aten.randint.default",
       "aten.randint.low", "aten.rand_like.default", "aten.randn_like.default", "aten.bernoulli.default",
       "aten.bernoulli.p", "aten.normal.Tensor_float", "aten.normal.float_Tensor", "aten.normal.Tensor_Tensor",
       "aten.uniform.default", "aten.multinomial.default", "aten.bernoulli.Tensor", "aten.normal.float_float",
       "aten.normal_functional.default", "aten.randint_like.default", "aten.randint_like.low_dtype",
       "aten.randint_like.Tensor", "aten.cauchy.default", "aten.exponential.default", "aten.geometric.default",
       "aten.log_normal.default", "aten.poisson.default", "aten.binomial.default", "aten._standard_gamma.default",
       "aten._sample_dirichlet.default", "aten.random.default", "aten.random.from", "aten.random.to",
       # the same with an explicit torch.Generator (generator=g)
       "aten.rand.generator", "aten.randn.generator", "aten.randperm.generator", "aten.randint.generator",
       "aten.randint.low_generator", "aten.rand_like.generator", "aten.randn_like.generator",
       "aten.randint_like.generator", "aten.randint_like.Tensor_generator",
       "aten.randint_like.low_generator_dtype",
       why="random numbers: a deployed model gets its randomness as an input tensor (generate it in the "
           "application and pass it in), so that a file gives the same answers on every board")

refuse("aten._local_scalar_dense.default", "aten.item.default",
       why="Tensor.item() (or float(t), int(t), bool(t)) turns a tensor's value into a Python number while the "
           "model is traced, so the program would depend on one example's data; keep the value a tensor "
           "(x * t rather than x * t.item())")
refuse("aten._linalg_check_errors.default", "aten._linalg_det.default", "aten._linalg_eigh.default",
       "aten._linalg_eigvals.default", "aten._linalg_slogdet.default", "aten._linalg_solve_ex.default",
       "aten._linalg_svd.default", "aten.cholesky.default", "aten.cholesky_inverse.default",
       "aten.cholesky_solve.default", "aten.geqrf.default", "aten.linalg_cholesky_ex.default",
       "aten.linalg_eig.default", "aten.linalg_householder_product.default", "aten.linalg_inv_ex.default",
       "aten.linalg_ldl_factor_ex.default", "aten.linalg_ldl_solve.default", "aten.linalg_lstsq.default",
       "aten.linalg_lu.default", "aten.linalg_lu_factor_ex.default", "aten.linalg_lu_solve.default",
       "aten.linalg_matrix_exp.default", "aten.linalg_pinv.atol_rtol_tensor", "aten.linalg_qr.default",
       "aten.linalg_solve_triangular.default", "aten.lu_unpack.default", "aten.ormqr.default",
       "aten.triangular_solve.default",
       why="matrix factorizations, inverses and solvers (LU, QR, SVD, Cholesky, eigen-decompositions, det) are "
           "not in the op set: compute them before export when the matrix is a constant, or in the application")
refuse("aten._to_sparse.default", "aten._to_sparse.sparse_dim", "aten.sparse_sampled_addmm.default",
       "aten._sparse_mm_reduce_impl.default",
       why="sparse layouts: openaccel tensors are dense (use the dense tensor, e.g. x.to_dense())")
refuse("aten.resize.default",
       why="resize_ / resize_as_ change a tensor's size in place, and the elements they add are uninitialized "
           "memory: use reshape / view, or make a new tensor (torch.zeros, torch.cat)")
