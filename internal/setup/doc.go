// Package setup holds what the manager binary needs before any controller
// runs: the scheme, the defaults of its flags, the options handed to the
// controllers, and small pure helpers (cluster domain detection, namespace
// list parsing) that are easier to test here than in main.
package setup
