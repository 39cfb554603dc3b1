// Launch shapes shared by the CUDA path's GPU kernels (*.cu only).
#pragma once

#include <cstddef>

namespace rkm::cuda {

constexpr int kThreads = 256;

// Blocks of kThreads for one thread per entry, capped: grid-stride loops take the rest.
inline unsigned blocks_for(std::size_t count) {
  const std::size_t blocks = (count + kThreads - 1) / kThreads;
  return unsigned(blocks < 65535u * 16u ? blocks : 65535u * 16u);
}

}  // namespace rkm::cuda
