// Package wizard is the guided migration shared by the web console and the TUI: which steps (plan,
// preflight, apply, verify, rollback) the caller may take now and, when not, why and which permissions they
// lack; and the runs of those steps in the background, with their progress, so a front end can show them
// live and a caller can stop one.
//
// Everything acts with the client it is given, which is the caller's own: the wizard never widens what a
// user may do. The migration's state is the record in the API (migrate/record); a run's progress lives only
// in the process that runs it.
package wizard
