package setup

import "testing"

// The metrics endpoint must never serve without TLS or without reviewing
// the caller: its series name every cluster the operator manages.
func TestMetricsServerOptionsAuthenticate(t *testing.T) {
	o := MetricsServerOptions(":9443", "/certs")
	if !o.SecureServing {
		t.Error("metrics are served without TLS: bearer tokens would cross the network in the clear")
	}
	if o.FilterProvider == nil {
		t.Error("metrics are served without authentication and authorization")
	}
	if o.BindAddress != ":9443" || o.CertDir != "/certs" {
		t.Errorf("address and certificate directory not passed through: %+v", o)
	}
}
