// The one place that names the files of a repository. Everything under
// the root that agentenv makes is listed here (docs/design.md shows the
// tree); nothing else builds these paths by hand.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentenv::snap::layout {

inline std::string Store(const std::string& root) { return root + "/store"; }       // packs and index
inline std::string Meta(const std::string& root) { return root + "/meta"; }         // history (LMDB)
inline std::string MetaData(const std::string& root) { return root + "/meta/data.mdb"; }
inline std::string WorkParent(const std::string& root) { return root + "/work"; }   // live tree and scratch
inline std::string Work(const std::string& root) { return root + "/work/current"; } // the live tree
inline std::string Lock(const std::string& root) { return root + "/lock"; }         // writers' file lock
inline std::string Ignore(const std::string& root) { return root + "/ignore"; }     // extra ignore patterns
inline std::string Socket(const std::string& root) { return root + "/agentenv.sock"; }     // control socket
inline std::string AgentSocket(const std::string& root) { return root + "/agent.sock"; }   // supervise: the agent's
inline std::string HttpToken(const std::string& root) { return root + "/http-token"; }    // serve --listen: bearer token (0600)
inline std::string Jobs(const std::string& root) { return root + "/jobs"; }         // spawn logs, exec sessions
inline std::string Lowers(const std::string& root) { return root + "/lowers"; }     // materialized nodes
inline std::string Subvols(const std::string& root) { return root + "/subvols"; }   // btrfs: nodes' snapshots
inline std::string Workspaces(const std::string& root) { return root + "/workspaces"; }  // overlay workspaces
inline std::string Restoring(const std::string& root) { return root + "/restoring"; }  // restore not finished
inline std::string Initializing(const std::string& root) { return root + "/initializing"; }  // init not finished
inline std::string OciLayers(const std::string& root) { return root + "/oci-layers"; }   // digests of exported layers
inline std::string Mounts(const std::string& root) { return root + "/mounts"; }       // records of mounted views
inline std::string Config(const std::string& root) { return root + "/config"; }       // settings (mounts/disk_limit.h)

// Where scratch directories (snap/scratch.h) live, and the prefixes of
// their names: each exists only while its maker or remover holds its lock,
// and is reclaimed by gc and by the next command that makes one there.
//   lowers/.tmp-*      a lower being built (snap/lowers.h)
//   workspaces/.new-*  a workspace being made (workspace/workspace.h)
//   work/{import,push,pull}-*  an archive or image being unpacked or packed
//   work/disk-*        the mount point of a live-tree exec's disk-limit tmpfs (mounts/disk_limit.h)
//   work/export-*      a tarball the web DVR made, until it is downloaded
//   work/recount-*     fsck's recount of every reference (snap/check.cc)
//   .pull-*            init --from-image: the image, before the repository exists
//   .rm-*              (everywhere) a directory being removed
inline std::vector<std::pair<std::string, std::vector<std::string_view>>> ScratchPlaces(const std::string& root) {
  return {{Lowers(root), {".tmp-", ".rm-"}},
          {Workspaces(root), {".new-", ".rm-"}},
          {WorkParent(root), {"import-", "push-", "pull-", "disk-", "export-", "recount-", ".rm-"}},
          {root, {".pull-", ".rm-"}}};
}

// What `init` made and removes again when it fails: every entry above
// that a new repository has.
inline const char* const kCreated[] = {"/store", "/meta", "/work", "/lock", "/initializing"};

}  // namespace agentenv::snap::layout
