// Package migratetest stands up, on a test API server, what a migration from an LVMCluster needs: the
// operator, a v1 and a v2 node agent played by test doubles, two nodes and a seed-shaped LVMCluster with a
// volume. The handover tests, the TUI and the browser wizard test share it.
package migratetest
