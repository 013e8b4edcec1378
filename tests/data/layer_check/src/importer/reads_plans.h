// The importer reading plans (the builder's, above it): the layer check refuses it.
#include "bertrt/plan.h"
