// Package apisurface guards the library's public API: its tests list every
// exported identifier of each public package against a golden file
// (api/*.txt at the repository root), so a change to the public surface is
// always a deliberate, reviewed edit, and check that importing one sink does
// not pull in the drivers of the others. It has no code of its own.
package apisurface
