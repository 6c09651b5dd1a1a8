// The IREE headers whose declarations `iree-sys` exposes. Regenerate the
// bindings after changing this list: `cargo xtask bindgen`.
#include "iree/base/api.h"
#include "iree/hal/api.h"
#include "iree/hal/device_group.h"
#include "iree/hal/drivers/init.h"
#include "iree/hal/drivers/local_sync/registration/driver_module.h"
#include "iree/hal/drivers/local_task/registration/driver_module.h"
#include "iree/modules/hal/module.h"
#include "iree/runtime/api.h"
#include "iree/vm/api.h"
#include "iree/vm/bytecode/module.h"
