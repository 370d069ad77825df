#ifndef HYDRA_CSQLITE_SHIM_H
#define HYDRA_CSQLITE_SHIM_H
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast of -1 to a destructor pointer: Swift cannot import it.
static const sqlite3_destructor_type hydra_sqlite_transient = SQLITE_TRANSIENT;

#endif
