// Package diagnostics holds LVMS's support tooling: support bundles (must-gather compatible) collected from a
// cluster, their redaction, reading them back as a console source, analyzers that turn a bundle into
// findings with fixes, and the difference between two bundles. The parts live in sub-packages:
//
//   - bundle: the on-disk format (layout, version file, manifest), a size-bounded writer (tar.gz or a
//     must-gather directory), a hardened reader (no path traversal, links, absolute paths or oversized
//     entries), and Bundle, the decoded content with a console.Source over it;
//   - redact: redaction of credentials in everything written, with a report of what was removed;
//   - collect: the collectors (API objects, events, pod logs, the node agents' own views), failing forward;
//   - analyze: pure analyzers over a bundle producing pass/warn/fail findings with the object and a fix;
//   - diff: what changed between two bundles.
//
// The file layout is documented in README.md ("Diagnostics").
package diagnostics
