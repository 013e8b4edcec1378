// The serving core writing JSON itself: the layer check refuses it.
#include <nlohmann/json.hpp>
