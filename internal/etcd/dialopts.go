package etcd

import "crypto/tls"

// DialSettings is what one dial to one cluster needs beyond the Dialer's
// own options: the cluster's client TLS (its CAs, and the operator's client
// certificate when the cluster checks them). One operator dials many
// clusters, each with its own CA, so this is per dial, not per Dialer.
type DialSettings struct {
	TLS *tls.Config
}

// DialOption sets part of a dial's settings.
type DialOption func(*DialSettings)

// WithClientTLS dials https endpoints with cfg.
func WithClientTLS(cfg *tls.Config) DialOption {
	return func(s *DialSettings) { s.TLS = cfg }
}

// ResolveDial applies opts over base; Dialer implementations use it.
func ResolveDial(base DialSettings, opts ...DialOption) DialSettings {
	for _, o := range opts {
		o(&base)
	}
	return base
}
