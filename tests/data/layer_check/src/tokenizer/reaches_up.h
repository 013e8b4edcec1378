// A tokenizer header that reaches up into the serving layer: the layer check refuses it.
#include "core/status_util.h"
#include "serving/served_model.h"
