#ifndef HYDRA_CSQLITE_SHIM_H
#define HYDRA_CSQLITE_SHIM_H
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast of -1 to a destructor pointer: Swift cannot import it.
static const sqlite3_destructor_type hydra_sqlite_transient = SQLITE_TRANSIENT;

/// Turns off SQLite's memory statistics (sqlite3_config is variadic: Swift
/// cannot call it). With them on, every allocation SQLite makes takes a
/// process-wide mutex, a tenth of the store writer's time. Must run before
/// SQLite initializes (the first open); returns SQLITE_MISUSE after.
static inline int hydra_sqlite_disable_memstatus(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

#endif
