// One entry point per command; each is defined in cmd_<verb>.cc and takes
// argv starting at the verb.
#pragma once

namespace agentenv::cli {

int CmdInit(int argc, char** argv);
int CmdSnap(int argc, char** argv);
int CmdRestore(int argc, char** argv);
int CmdLog(int argc, char** argv);
int CmdShow(int argc, char** argv);
int CmdDiff(int argc, char** argv);
int CmdTag(int argc, char** argv);
int CmdHead(int argc, char** argv);
int CmdBranches(int argc, char** argv);
int CmdStatus(int argc, char** argv);
int CmdFsck(int argc, char** argv);
int CmdDaemon(int argc, char** argv);
int CmdServe(int argc, char** argv);
// daemon and serve are one command; serve's help leads with the listener.
int RunDaemon(int argc, char** argv, const char* name, const char* about);
int CmdCtl(int argc, char** argv);
int CmdCtlExec(int argc, char** argv);
int CmdMcp(int argc, char** argv);
int CmdExport(int argc, char** argv);
int CmdImport(int argc, char** argv);
int CmdPush(int argc, char** argv);
int CmdPull(int argc, char** argv);
int CmdExec(int argc, char** argv);
int CmdSupervise(int argc, char** argv);
int CmdShell(int argc, char** argv);
int CmdRetain(int argc, char** argv);
int CmdGc(int argc, char** argv);
int CmdFork(int argc, char** argv);
int CmdLs(int argc, char** argv);
int CmdCat(int argc, char** argv);
int CmdWorkspace(int argc, char** argv);
int CmdToken(int argc, char** argv);
int CmdEnv(int argc, char** argv);
int CmdTournament(int argc, char** argv);
int CmdBisect(int argc, char** argv);
int CmdMount(int argc, char** argv);
int CmdConfig(int argc, char** argv);
int CmdUmount(int argc, char** argv);

}  // namespace agentenv::cli
