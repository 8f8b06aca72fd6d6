package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
)

// credentials are what kubectl etcd authenticates with when the cluster
// has etcd's authentication on. With mutual client TLS its client
// certificate names root (requestedCommonName, or the administrators'
// certificate), as the operator's does; otherwise it reads root's password
// from the cluster's root Secret, which needs the permission to get that
// Secret: whoever may read it may act as root anyway. The password stays
// in memory, on no command line and in no output.
func (e *Env) credentials(ctx context.Context, s *session, https bool) ([]etcd.DialOption, error) {
	c := s.cluster
	shape := etcdaccess.Shape{TLS: c.Spec.TLS != nil, HTTPS: https, Mutual: https && c.Spec.TLS != nil && c.Spec.TLS.Client.IsMutual()}
	if etcdaccess.IdentityOf(c, shape) != etcdaccess.IdentityPassword {
		return nil, nil
	}
	password, err := etcdaccess.RootPassword(ctx, e.Kube, c)
	var rs *etcdaccess.RootSecretError
	switch {
	case errors.As(err, &rs):
		return nil, fmt.Errorf("EtcdCluster %s has etcd's authentication on and root's password cannot be read: %w", s.ref(), rs)
	case err != nil:
		return nil, access{verb: "get", resource: "secrets", namespace: c.Namespace,
			what: fmt.Sprintf("Secret %s with root's password (EtcdCluster %s has etcd's authentication on)", c.RootSecretName(), c.Name)}.explain(err)
	}
	return []etcd.DialOption{etcd.WithPassword(etcd.RootUser, password)}, nil
}
