// Explicit feature maps whose inner products approximate a kernel (the primal side of kernel PCA).
#pragma once

#include "core/common.hpp"

namespace rkm {

// Random Fourier features (Rahimi & Recht 2007): Y = sqrt(2 / D) cos(X W + 1 offset^T) for X (n x d),
// W (d x D) and offset (D). X W runs in T (BLAS) a band of rows at a time; the cosines in double.
template <typename T>
void fourier_features(const ConstMatrixRef<T>& X, const ConstMatrixRef<T>& W, const ConstVectorRef<T>& offset,
                      MatrixRef<T> Y, int n_threads);

}  // namespace rkm
