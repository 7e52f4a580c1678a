// The one mapping of an LMDB return code to an Error, for both LMDB
// databases (store/index.cc, snap/meta*.cc): the same damage gives the
// same code, and so the same exit status, whichever database has it.
#pragma once

#include <lmdb.h>

#include <string>

#include "common/result.h"

namespace agentenv::store {

// "<what>: <LMDB's text>"; kCorrupt for a damaged file (MDB_CORRUPTED,
// MDB_PAGE_NOTFOUND, MDB_INVALID: not an LMDB file, or a wrong version),
// else kIo with the errno LMDB passed through (0 for LMDB's own codes).
inline Error LmdbError(const std::string& what, int rc) {
  bool damaged = rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID;
  return Error{what + ": " + mdb_strerror(rc), rc > 0 ? rc : 0, damaged ? ErrorCode::kCorrupt : ErrorCode::kIo};
}

}  // namespace agentenv::store
