// A SQLite VFS that writes each commit's WAL frames with one `pwrite`.
// Only HydraStore imports this module.
#ifndef HYDRA_CSQLITEWAL_H
#define HYDRA_CSQLITEWAL_H
#include <sqlite3.h>

/// The VFS's name, to pass to `sqlite3_open_v2`.
#define HYDRA_WAL_VFS_NAME "hydra-wal"

/// Registers the "hydra-wal" VFS (not as the default) over the default VFS.
/// Safe to call from any thread, any number of times; returns SQLITE_OK once
/// it is registered, or SQLite's error.
int hydra_wal_vfs_register(void);

/// How many writes SQLite made to the WAL file of `db`'s main database, and
/// how many of them reached the file (gathered: fewer). SQLITE_NOTFOUND when
/// that WAL is not open through this VFS. On `db`'s thread only: the store's
/// tests read it to see that a commit's frames went down together.
int hydra_wal_vfs_counts(sqlite3 *db, unsigned long long *sqliteWrites, unsigned long long *fileWrites);

#endif
