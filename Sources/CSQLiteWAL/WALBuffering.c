// The "hydra-wal" VFS: SQLite's default VFS, except that the frames one
// connection appends to its WAL file are gathered in memory and written with
// one call when the commit frame is complete (and before anything else touches
// that file or the shared memory that publishes new frames).
//
// Why: SQLite writes every WAL frame as two `pwrite`s (its 24-byte header,
// then the page), so a commit of n pages is 2n system calls. On the busy
// server's writer thread these were about 3 calls per durable submit.
//
// What it keeps: the bytes, their offsets and their order are SQLite's own;
// only contiguous appends are delayed, and never past
//   - the end of the commit frame's page (the commit's last write: the flush
//     happens inside that `xWrite`, whose result SQLite gets), and
//   - any other call on the WAL file (read, sync, truncate, size, file
//     control, close) or on the shared memory (lock, barrier, map), which is
//     where SQLite publishes committed frames to other connections.
// A write that is not the continuation of the previous one goes down at once,
// after whatever was gathered. A failed gathered write is reported by the call
// that flushed it: within the same transaction, before it commits.
//
// Threads: a file's buffer belongs to the connection that owns the file (one
// thread at a time, as SQLite's NOMUTEX connections are). The last file with
// gathered bytes is also remembered per thread, so the shared-memory calls of
// the main database file, made on that thread, can flush it.
#include "CSQLiteWAL.h"
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

/// The most gathered before a write: a larger transaction goes down in pieces
/// of up to this size. The unix VFS writes at most this much in one call (its
/// `seekAndWriteFd` masks the length with 0x1ffff: SQLite itself never writes
/// more than a page); a longer write came back short, as SQLITE_FULL.
#define GATHER_LIMIT 0x1ffff
/// A WAL frame's header (SQLite's WAL_FRAME_HDRSIZE); bytes 4-7 hold the
/// database size after a commit, zero in every other frame.
#define FRAME_HEADER_SIZE 24
/// The WAL file's own header (WAL_HDRSIZE): frames start after it.
#define WAL_HEADER_SIZE 32

typedef struct HydraFile {
    sqlite3_file base;
    /// The default VFS's file, in the same allocation, after this struct.
    sqlite3_file *real;
    int isWAL;
    /// The last write was the header of a commit frame: the next write, its
    /// page, ends the commit.
    int commitPageNext;
    /// A flush made on behalf of another call (a shared-memory call, another
    /// file's write on this thread) failed: this file's next call reports it.
    int deferredError;
    /// Gathered bytes, to be written at `start`.
    unsigned char *buffer;
    size_t used;
    sqlite3_int64 start;
    /// Where the last write (gathered or not) ended: the next one continues it when it starts here.
    sqlite3_int64 end;
    /// The writes SQLite made to this WAL file, and those that reached the file below.
    unsigned long long sqliteWrites;
    unsigned long long fileWrites;
} HydraFile;

#define REAL_OFFSET ((sizeof(HydraFile) + 7) & ~(size_t)7)

static sqlite3_vfs *below;
static sqlite3_vfs vfs;
static _Thread_local HydraFile *gatheringOnThread;

static int flush(HydraFile *f) {
    if (gatheringOnThread == f) gatheringOnThread = NULL;
    if (f->used == 0) return SQLITE_OK;
    int amount = (int)f->used;
    f->used = 0;  // written, or lost with an error that fails their transaction
    f->fileWrites++;
    return f->real->pMethods->xWrite(f->real, f->buffer, amount, f->start);
}

/// Flushes `f` and returns an error held for it, if any.
static int settle(HydraFile *f) {
    int rc = flush(f);
    if (rc == SQLITE_OK && f->deferredError != SQLITE_OK) rc = f->deferredError;
    f->deferredError = SQLITE_OK;
    return rc;
}

/// Flushes the bytes gathered on this thread by a file other than `except`
/// (normally none: each commit flushes its own). A failure is held for that
/// file's next call: only frames not committed yet can be pending here, so
/// the transaction they belong to fails, not a later reader.
static void flushGatheringOnThread(HydraFile *except) {
    HydraFile *other = gatheringOnThread;
    if (other == NULL || other == except) return;
    int rc = flush(other);
    if (rc != SQLITE_OK && other->deferredError == SQLITE_OK) other->deferredError = rc;
}

/// Appends to the gathered bytes (the caller made room: at most GATHER_LIMIT in all).
static int gather(HydraFile *f, const void *data, int amount, sqlite3_int64 offset) {
    size_t needed = f->used + (size_t)amount;
    if (f->buffer == NULL) {
        f->buffer = malloc(GATHER_LIMIT);
        if (f->buffer == NULL) return SQLITE_NOMEM;
    }
    if (f->used == 0) f->start = offset;
    memcpy(f->buffer + f->used, data, (size_t)amount);
    f->used = needed;
    gatheringOnThread = f;
    return SQLITE_OK;
}

static int fileClose(sqlite3_file *file) {
    HydraFile *f = (HydraFile *)file;
    int rc = settle(f);
    int closed = f->real->pMethods->xClose(f->real);
    free(f->buffer);
    f->buffer = NULL;
    return rc != SQLITE_OK ? rc : closed;
}

static int fileRead(sqlite3_file *file, void *data, int amount, sqlite3_int64 offset) {
    HydraFile *f = (HydraFile *)file;
    if (f->isWAL) {
        int rc = settle(f);
        if (rc != SQLITE_OK) return rc;
    }
    return f->real->pMethods->xRead(f->real, data, amount, offset);
}

static int fileWrite(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset) {
    HydraFile *f = (HydraFile *)file;
    if (!f->isWAL) return f->real->pMethods->xWrite(f->real, data, amount, offset);
    f->sqliteWrites++;
    flushGatheringOnThread(f);
    int endsCommit = f->commitPageNext && amount != FRAME_HEADER_SIZE;
    f->commitPageNext = 0;
    if (amount == FRAME_HEADER_SIZE && offset >= WAL_HEADER_SIZE) {
        const unsigned char *header = data;
        f->commitPageNext = (header[4] | header[5] | header[6] | header[7]) != 0;
    }
    int rc = SQLITE_OK;
    // A write larger than the limit (not one SQLite makes) goes down alone, after the rest.
    int continues = offset == f->end && amount <= GATHER_LIMIT;  // then also the end of what is gathered
    if (!continues || f->used + (size_t)amount > GATHER_LIMIT) {
        rc = settle(f);
        if (rc != SQLITE_OK) return rc;
    }
    f->end = offset + amount;
    if (!continues) {
        // Not an append (a rewritten frame, a checksum pass, another connection's
        // frames before ours): straight down, as SQLite wrote it.
        f->fileWrites++;
        return f->real->pMethods->xWrite(f->real, data, amount, offset);
    }
    rc = gather(f, data, amount, offset);
    if (rc != SQLITE_OK) return rc;
    return endsCommit ? settle(f) : SQLITE_OK;
}

static int fileTruncate(sqlite3_file *file, sqlite3_int64 size) {
    HydraFile *f = (HydraFile *)file;
    int rc = settle(f);
    if (rc != SQLITE_OK) return rc;
    if (f->end > size) f->end = -1;
    return f->real->pMethods->xTruncate(f->real, size);
}

static int fileSync(sqlite3_file *file, int flags) {
    HydraFile *f = (HydraFile *)file;
    int rc = settle(f);
    if (rc != SQLITE_OK) return rc;
    return f->real->pMethods->xSync(f->real, flags);
}

static int fileSize(sqlite3_file *file, sqlite3_int64 *size) {
    HydraFile *f = (HydraFile *)file;
    int rc = settle(f);
    if (rc != SQLITE_OK) return rc;
    return f->real->pMethods->xFileSize(f->real, size);
}

static int fileLock(sqlite3_file *file, int level) {
    HydraFile *f = (HydraFile *)file;
    return f->real->pMethods->xLock(f->real, level);
}

static int fileUnlock(sqlite3_file *file, int level) {
    HydraFile *f = (HydraFile *)file;
    return f->real->pMethods->xUnlock(f->real, level);
}

static int fileCheckReservedLock(sqlite3_file *file, int *out) {
    HydraFile *f = (HydraFile *)file;
    return f->real->pMethods->xCheckReservedLock(f->real, out);
}

static int fileControl(sqlite3_file *file, int op, void *arg) {
    HydraFile *f = (HydraFile *)file;
    if (f->isWAL) {
        int rc = settle(f);
        if (rc != SQLITE_OK) return rc;
    }
    return f->real->pMethods->xFileControl(f->real, op, arg);
}

static int fileSectorSize(sqlite3_file *file) {
    HydraFile *f = (HydraFile *)file;
    return f->real->pMethods->xSectorSize(f->real);
}

static int fileDeviceCharacteristics(sqlite3_file *file) {
    HydraFile *f = (HydraFile *)file;
    return f->real->pMethods->xDeviceCharacteristics(f->real);
}

// The shared-memory calls come on the main database file, from the thread of
// the connection that wrote the WAL: its gathered frames go down first.

static int fileShmMap(sqlite3_file *file, int page, int size, int extend, void volatile **out) {
    HydraFile *f = (HydraFile *)file;
    flushGatheringOnThread(NULL);
    return f->real->pMethods->xShmMap(f->real, page, size, extend, out);
}

static int fileShmLock(sqlite3_file *file, int offset, int n, int flags) {
    HydraFile *f = (HydraFile *)file;
    flushGatheringOnThread(NULL);
    return f->real->pMethods->xShmLock(f->real, offset, n, flags);
}

static void fileShmBarrier(sqlite3_file *file) {
    HydraFile *f = (HydraFile *)file;
    flushGatheringOnThread(NULL);
    f->real->pMethods->xShmBarrier(f->real);
}

static int fileShmUnmap(sqlite3_file *file, int deleteFlag) {
    HydraFile *f = (HydraFile *)file;
    flushGatheringOnThread(NULL);
    return f->real->pMethods->xShmUnmap(f->real, deleteFlag);
}

static int fileFetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **out) {
    HydraFile *f = (HydraFile *)file;
    return f->real->pMethods->xFetch(f->real, offset, amount, out);
}

static int fileUnfetch(sqlite3_file *file, sqlite3_int64 offset, void *page) {
    HydraFile *f = (HydraFile *)file;
    return f->real->pMethods->xUnfetch(f->real, offset, page);
}

static const sqlite3_io_methods methods = {
    3,
    fileClose, fileRead, fileWrite, fileTruncate, fileSync, fileSize,
    fileLock, fileUnlock, fileCheckReservedLock, fileControl,
    fileSectorSize, fileDeviceCharacteristics,
    fileShmMap, fileShmLock, fileShmBarrier, fileShmUnmap,
    fileFetch, fileUnfetch,
};

static int vfsOpen(sqlite3_vfs *unused, sqlite3_filename name, sqlite3_file *file, int flags, int *outFlags) {
    (void)unused;
    HydraFile *f = (HydraFile *)file;
    memset(f, 0, sizeof(HydraFile));
    f->real = (sqlite3_file *)((unsigned char *)file + REAL_OFFSET);
    f->isWAL = (flags & SQLITE_OPEN_WAL) != 0;
    f->end = -1;
    int rc = below->xOpen(below, name, f->real, flags, outFlags);
    // SQLite calls xClose when pMethods is set, even after a failed open: ours
    // only when the file below has methods to close.
    if (f->real->pMethods == NULL) {
        f->base.pMethods = NULL;
        return rc;
    }
    if (f->real->pMethods->iVersion < 3) {
        f->real->pMethods->xClose(f->real);
        f->base.pMethods = NULL;
        return SQLITE_CANTOPEN;
    }
    f->base.pMethods = &methods;
    return rc;
}

static int registered = SQLITE_ERROR;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void registerOnce(void) {
    below = sqlite3_vfs_find(NULL);
    if (below == NULL) return;
    vfs = *below;  // every other method is the default VFS's, with its own data
    vfs.szOsFile = (int)REAL_OFFSET + below->szOsFile;
    vfs.pNext = NULL;
    vfs.zName = HYDRA_WAL_VFS_NAME;
    vfs.xOpen = vfsOpen;
    registered = sqlite3_vfs_register(&vfs, 0);
}

int hydra_wal_vfs_register(void) {
    pthread_once(&once, registerOnce);
    return registered;
}

int hydra_wal_vfs_counts(sqlite3 *db, unsigned long long *sqliteWrites, unsigned long long *fileWrites) {
    sqlite3_file *wal = NULL;
    int rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
    if (rc != SQLITE_OK) return rc;
    if (wal == NULL || wal->pMethods != &methods) return SQLITE_NOTFOUND;
    HydraFile *f = (HydraFile *)wal;
    *sqliteWrites = f->sqliteWrites;
    *fileWrites = f->fileWrites;
    return SQLITE_OK;
}
