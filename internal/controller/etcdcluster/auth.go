package etcdcluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	"github.com/quorumctl/etcd-operator/internal/etcdaccess"
)

// generatedPasswordBytes is the randomness of a generated root password:
// 32 bytes, 43 characters of base64.
const generatedPasswordBytes = 32

// reconcileAuth brings etcd's authentication to spec.auth: it generates
// root's password when no Secret is named, and on a formed cluster whose
// quorum answers it turns authentication on (root with the root role, the
// operator's certificate user when it has one, then AuthEnable). Every
// step is idempotent, so a pass that fails half way, or an operator
// restarted in between, only does the rest again. Passwords go from the
// Secret to etcd and nowhere else: no log, Event or status carries one.
func (r *Reconciler) reconcileAuth(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	if !c.AuthEnabled() {
		c.Status.Auth = nil
		return ctrl.Result{}, nil
	}
	if c.Status.Auth == nil {
		c.Status.Auth = &v1alpha1.AuthStatus{}
	}
	c.Status.Auth.RootSecretName = c.RootSecretName()
	if c.Spec.Auth.RootSecretName == "" {
		created, err := r.ensureGeneratedRootSecret(ctx, s)
		if err != nil || created {
			// The Secret's event brings the next pass, which reads it.
			return ctrl.Result{}, err
		}
	}
	if !c.ClusterFormed() || !s.etcd.usable() || c.Status.Auth.Enabled {
		// Nothing to do, or nothing to do it with: the status says why the
		// view is unusable (AuthFailed among others).
		return ctrl.Result{}, nil
	}
	password, err := etcdaccess.RootPassword(ctx, r.rootSecretReader(c), c)
	if err != nil {
		return ctrl.Result{}, err
	}
	cl, err := r.Dialer.Dial(ctx, r.endpoints(s), s.access.Options...)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to dial etcd to turn authentication on: %w", err)
	}
	defer cl.Close()
	on, err := cl.AuthEnabled(ctx)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to read whether etcd's authentication is on: %w", err)
	}
	if !on {
		setup := etcd.AuthSetup{RootPassword: password}
		if s.access.Identity == etcdaccess.IdentityCertificate && s.access.CertificateUser != "" {
			setup.CertificateUsers = []string{s.access.CertificateUser}
		}
		s.setProgress(v1alpha1.EnablingAuthReason, "turning etcd's authentication on")
		if err := cl.EnableAuth(ctx, setup); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to turn etcd's authentication on: %w", err)
		}
		ctrl.LoggerFrom(ctx).Info("Turned etcd's authentication on", "rootSecret", c.Status.Auth.RootSecretName, "identity", string(s.access.Identity))
		r.event(c, corev1.EventTypeNormal, "AuthEnabled", "EnableAuth",
			"Turned etcd's authentication on; root's password is in Secret %s; the operator authenticates by %s", c.Status.Auth.RootSecretName, identityText(s.access))
	}
	c.Status.Auth.Enabled = true
	return ctrl.Result{}, nil
}

func identityText(a etcdaccess.Access) string {
	if a.Identity == etcdaccess.IdentityCertificate {
		return fmt.Sprintf("its client certificate (user %s)", a.CertificateUser)
	}
	return "root's password"
}

// rootSecretReader reads the root Secret: the cache holds the generated
// one (labelled), only the API server one the user named.
func (r *Reconciler) rootSecretReader(c *v1alpha1.EtcdCluster) client.Reader {
	if c.Spec.Auth != nil && c.Spec.Auth.RootSecretName != "" && r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// ensureGeneratedRootSecret creates root's password once, in a Secret the
// cluster owns; it is never rewritten, since etcd has it. created says it
// was created by this call.
func (r *Reconciler) ensureGeneratedRootSecret(ctx context.Context, s *scope) (bool, error) {
	name := v1alpha1.GeneratedRootSecretName(s.cluster.Name)
	existing := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: name}, existing)
	switch {
	case err == nil:
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("failed to get Secret %s: %w", name, err)
	}
	raw := make([]byte, generatedPasswordBytes)
	if _, err := rand.Read(raw); err != nil {
		return false, fmt.Errorf("failed to generate root's password: %w", err)
	}
	secret := r.ownedSecret(s, name, corev1.SecretTypeBasicAuth, map[string][]byte{
		corev1.BasicAuthUsernameKey: []byte(etcd.RootUser),
		v1alpha1.RootPasswordKey:    []byte(base64.RawURLEncoding.EncodeToString(raw)),
	})
	if err := r.Create(ctx, secret); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return false, fmt.Errorf("failed to create Secret %s with root's password: %w", name, err)
	}
	r.event(s.cluster, corev1.EventTypeNormal, "RootPasswordGenerated", "Create",
		"Generated root's password into Secret %s", name)
	return true, nil
}

// authPending: spec.auth asks for authentication that is not on yet.
func authPending(s *scope) bool {
	return s.cluster.AuthEnabled() && (s.cluster.Status.Auth == nil || !s.cluster.Status.Auth.Enabled)
}
