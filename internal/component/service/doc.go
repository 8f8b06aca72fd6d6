// Package service builds and keeps in shape the two Services of a cluster:
// the headless peer Service that gives every member its stable DNS name, and
// the client Service that routes to voting members only.
//
// Unlike Pods, Services are kept converged: Sync repairs drift in the fields
// the operator owns. It compares before it writes, so an idle operator makes
// no API writes at all.
package service
