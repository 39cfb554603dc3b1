// Pre-images: from latent points back to input space (Gen-RKM, Pandey et al. 2021, eqs. 7-8).
#pragma once

#include "core/common.hpp"

namespace rkm {

// The kernel-smoother pre-image of Gen-RKM eq. 8, with the similarities of eq. 7 formed a band of rows at a
// time. For each latent row i (latents: n x s) the similarities to the N training points are
// sim_j = latents_i . projection_j + offsets_j (projection: N x s). With k = min(n_neighbors, N): when k < N the
// k largest similarities (ties go to the lower index) are the neighbours and the (k+1)-th largest is the floor;
// otherwise every training point is a neighbour and the floor is the smallest similarity. The neighbours weigh
// (sim - floor) / (max - floor), all 1 when max == floor, normalised to sum 1, and out_i is the weighted mean
// of their rows of X_train (N x d). out: n x d.
//
// No thread holds more than a band of kBandBytes of similarities (at least one row), so memory stays bounded
// for any n. float32 works in float32 for the similarities (one GEMM per band) and in double for the weights
// and the means. float64 screens in float32 when k < N: a float32 GEMM with a rigorous bound on its error
// keeps every training point that can still be among the k + 1 largest, and only those are scored in double,
// so the neighbours and the floor are those of the double similarities. Bands are fixed by n, N and the dtype,
// never by the thread count, so results are bit-identical for any n_threads. Ctrl-C is honoured between bands.
template <typename T>
void smoother_preimage(const ConstMatrixRef<T>& latents, const ConstMatrixRef<T>& projection,
                       const ConstVectorRef<T>& offsets, const ConstMatrixRef<T>& X_train, Eigen::Index n_neighbors,
                       MatrixRef<T> out, int n_threads);

// The most rows of latents per band for N training points and similarities of `value_bytes` each (kBandBytes /
// row bytes, at least 1; fewer where that leaves under 8 bands of 32 rows or more); exposed for the tests.
Eigen::Index smoother_band_rows(Eigen::Index n_train, std::size_t value_bytes);

}  // namespace rkm
