// Symmetric eigensolvers: dense (all pairs) and a restarted block Krylov method for the top pairs.
#pragma once

#include "core/common.hpp"

#include <functional>

namespace rkm {

// Y = A X for a block X (n x b); the only access the iterative solver needs to A.
template <typename T>
using BlockProduct = std::function<void(const ConstMatrixRef<T>& X, MatrixRef<T> Y)>;

template <typename T>
struct EigenResult {
  Vector<T> values;           // descending
  RowMatrix<T> vectors;       // n x s, orthonormal columns, sign-fixed
  Eigen::VectorXd residuals;  // ||A v - w v|| / max |w| over the returned values
  int n_iter = 0;             // number of block products with A
  bool converged = false;
};

// All eigenpairs of the symmetric matrix A, descending, each eigenvector's largest-magnitude entry positive.
template <typename T>
void dense_eigh(const ConstMatrixRef<T>& A, Vector<T>& values, RowMatrix<T>& vectors, int n_threads);

// The n_components largest (algebraic) eigenpairs of a symmetric operator of order n, by a block Krylov
// (Davidson-type) iteration with thick restarts and soft locking: each step multiplies A with one block of
// b columns (one pass over a stored A), namely the residuals of the first b Ritz pairs not yet converged,
// orthogonalized against the basis (two rounds of block Gram-Schmidt + QR), then does Rayleigh-Ritz on
// the incrementally updated projected matrix. b may be smaller than n_components: narrow blocks stream A
// at memory speed and need the fewest multiplied columns in all. `start` (n x b) fixes the first block,
// so results are deterministic. Stops when every wanted relative residual is <= tol (checked for all
// wanted pairs together) or after max_iter block products, reporting the residuals reached either way.
template <typename T>
EigenResult<T> top_eigsh(const BlockProduct<T>& apply, Eigen::Index n, int n_components,
                         const ConstMatrixRef<T>& start, double tol, int max_iter, int n_threads);

// The same for a stored symmetric matrix, of which only the lower triangle is read (products by
// block_product with symmetric = true).
template <typename T>
EigenResult<T> top_eigsh(const ConstMatrixRef<T>& A, int n_components, const ConstMatrixRef<T>& start,
                         double tol, int max_iter, int n_threads);

// Columns of n-vectors (in T) that top_eigsh holds at most besides the operator: the basis and its
// products (4 kept_columns), a restart's temporary block (kept_columns), the best iterate (3 n_components)
// and a window of Ritz blocks (3 b); the final refinement holds 4 n_components columns of doubles (counted
// here as 8 in T, enough for float32).
Eigen::Index krylov_workspace_columns(int n_components, Eigen::Index block_columns);

// Flips each column of V so that its entry of largest magnitude is positive (as scikit-learn's svd_flip).
template <typename T>
void fix_signs(MatrixRef<T> V);

}  // namespace rkm
