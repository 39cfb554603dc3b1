// Centering of kernel matrices in feature space (Suykens 2017 eq. 2.16; Gen-RKM eq. 17).
#pragma once

#include "core/common.hpp"

#include <utility>

namespace rkm {

// Double-centres the square matrix K in place: K_ij <- K_ij - r_i - c_j + g, with r the row means, c the
// column means and g the grand mean of the original K (r = c when K is symmetric). Two passes over K and
// no N x N temporary. Returns (c, g), which centre test rows later. With lower_only, K is symmetric and
// given by its lower triangle: only that triangle is read and centred (half the memory traffic).
template <typename T>
std::pair<Vector<T>, double> center_kernel(MatrixRef<T> K, int n_threads, bool lower_only = false);

// Centres test rows k(x*, X) in place with the training column means and grand mean:
// K_ij <- K_ij - mean_j' K_ij' - column_means_j + grand_mean.
template <typename T>
void center_kernel_rows(MatrixRef<T> K_rows, const ConstVectorRef<T>& column_means, double grand_mean,
                        int n_threads);

}  // namespace rkm
