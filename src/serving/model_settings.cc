#include "serving/model_settings.h"

namespace bertrt::serving {

StatusOr<WarmupSample> ParseWarmupShape(const std::string& text) {
  auto number = [](const std::string& s) -> int {
    if (s.empty() || s.size() > 7 || s.find_first_not_of("0123456789") != std::string::npos)
      return 0;
    return std::stoi(s);
  };
  // "N" or "MIN-MAX" into [low, high]; 0s when malformed.
  auto range = [&](const std::string& s) -> std::pair<int, int> {
    const size_t dash = s.find('-');
    if (dash == std::string::npos) return {number(s), number(s)};
    const int low = number(s.substr(0, dash)), high = number(s.substr(dash + 1));
    return low <= high ? std::pair{low, high} : std::pair{0, 0};
  };
  const size_t x = text.find('x');
  const auto [batch, max_batch] =
      x == std::string::npos ? std::pair{0, 0} : range(text.substr(0, x));
  const auto [length, max_length] =
      x == std::string::npos ? std::pair{0, 0} : range(text.substr(x + 1));
  if (batch <= 0 || length <= 0)
    return InvalidArgument("warm-up shape \"" + text +
                           "\": expected BATCHxLENGTH with positive numbers, each one number or "
                           "a range MIN-MAX, e.g. 8x128 or 1-32x100-192");
  WarmupSample sample;
  sample.name = text;
  sample.batch_size = batch;
  sample.length = length;
  if (max_batch != batch || max_length != length) {
    sample.up_to_batch_size = max_batch;
    sample.up_to_length = max_length;
  }
  return sample;
}

}  // namespace bertrt::serving
