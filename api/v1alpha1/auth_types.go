package v1alpha1

// AuthSpec turns on etcd's authentication. The operator creates etcd's
// root user (with the root role) and turns authentication on, also on a
// cluster that is already running; it then reaches etcd as root, by its
// client certificate when every member checks client certificates (mutual
// client TLS), by root's password otherwise. See docs/design/0015-auth.md.
//
// +kubebuilder:validation:XValidation:rule="!has(self.rootSecretName) || (has(self.enabled) && self.enabled)",message="auth.rootSecretName is only used with auth.enabled: true"
type AuthSpec struct {
	// Enabled turns etcd's authentication on. Once on it cannot be turned
	// off: the operator does not turn etcd's authentication off.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// RootSecretName is a Secret in the cluster's namespace whose key
	// password holds root's password. Empty: the operator generates a
	// password into Secret <cluster>-etcd-root, which the cluster owns.
	// Root's password is set from the Secret when authentication is turned
	// on; afterwards the Secret must hold root's current password, which
	// changes in etcd only (etcdctl user passwd root), and then in it.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="auth.rootSecretName must be the name of a Secret: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +optional
	RootSecretName string `json:"rootSecretName,omitempty"`
}

// AuthStatus is where the cluster's authentication stands.
type AuthStatus struct {
	// Enabled: etcd's authentication is on, as the operator last saw it.
	Enabled bool `json:"enabled"`
	// RootSecretName is the Secret that holds root's password (its key
	// password).
	// +optional
	RootSecretName string `json:"rootSecretName,omitempty"`
}

// RootPasswordKey is the key of root's password in its Secret.
const RootPasswordKey = "password"

// AuthEnabled reports whether spec.auth turns authentication on.
func (c *EtcdCluster) AuthEnabled() bool { return c.Spec.Auth != nil && c.Spec.Auth.Enabled }

// RootSecretName is the Secret with root's password: the one spec.auth
// names, or the one the operator generates.
func (c *EtcdCluster) RootSecretName() string {
	if c.Spec.Auth != nil && c.Spec.Auth.RootSecretName != "" {
		return c.Spec.Auth.RootSecretName
	}
	return GeneratedRootSecretName(c.Name)
}

// GeneratedRootSecretName holds root's password when spec.auth names no
// Secret.
func GeneratedRootSecretName(cluster string) string { return cluster + "-etcd-root" }
