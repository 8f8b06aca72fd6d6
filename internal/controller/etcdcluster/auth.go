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

// reconcileAuth brings etcd's authentication to spec.auth: it generates
// root's password when none is named, creates root and turns auth on (or
// off), and with certificate identity keeps root's password equal to the
// Secret's. Passwords never leave the Secret and the etcd calls: no log,
// Event or status carries one.
func (r *Reconciler) reconcileAuth(ctx context.Context, s *scope) (ctrl.Result, error) {
	auth := s.cluster.Spec.Auth
	if auth == nil {
		return ctrl.Result{}, nil
	}
	if auth.RootSecretName == "" {
		if err := r.ensureGeneratedRootSecret(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	secretRef := s.cluster.Namespace + "/" + etcdaccess.RootSecretName(s.cluster)
	if etcd.IsAuthFailed(s.etcd.err) || etcd.IsAuthRequired(s.etcd.err) {
		return ctrl.Result{}, &inputError{reason: v1alpha1.AuthFailedReason, message: fmt.Sprintf(
			"etcd refused root's credentials from Secret %s (%v); put root's password in it, or, with mutual client TLS, the operator resets it", secretRef, s.etcd.err)}
	}
	if !s.etcd.usable() {
		return ctrl.Result{}, nil
	}
	password, why, err := etcdaccess.RootPassword(ctx, r.APIReader, s.cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if why != "" && auth.Enabled {
		return ctrl.Result{}, &inputError{reason: v1alpha1.AuthSecretInvalidReason, message: why}
	}
	c, err := r.Dialer.Dial(ctx, r.endpoints(s), s.access.Options...)
	if err != nil {
		return ctrl.Result{}, r.authError(err, secretRef)
	}
	defer c.Close()
	enabled, err := c.AuthEnabled(ctx)
	if err != nil {
		return ctrl.Result{}, r.authError(err, secretRef)
	}
	switch {
	case auth.Enabled && !enabled:
		if err := c.EnableAuth(ctx, password); err != nil {
			return ctrl.Result{}, r.authError(err, secretRef)
		}
		ctrl.LoggerFrom(ctx).Info("Turned etcd authentication on", "rootSecret", secretRef)
		r.event(s.cluster, corev1.EventTypeNormal, "AuthEnabled", "EnableAuth",
			"Turned etcd authentication on; root's password is in Secret %s", secretRef)
	case !auth.Enabled && enabled:
		if err := c.DisableAuth(ctx); err != nil {
			return ctrl.Result{}, r.authError(err, secretRef)
		}
		r.event(s.cluster, corev1.EventTypeNormal, "AuthDisabled", "DisableAuth", "Turned etcd authentication off")
	case auth.Enabled && s.access.CertificateIdentity:
		// The operator is root by its certificate, so it can make root's
		// password what the Secret says when someone changed either.
		err := c.CheckPassword(ctx, etcd.RootUser, password)
		if etcd.IsAuthFailed(err) {
			if err := c.ChangePassword(ctx, etcd.RootUser, password); err != nil {
				return ctrl.Result{}, r.authError(err, secretRef)
			}
			r.event(s.cluster, corev1.EventTypeNormal, "RootPasswordSet", "SetPassword",
				"Set root's password to the one in Secret %s", secretRef)
		} else if err != nil && !etcd.IsUnavailable(err) {
			return ctrl.Result{}, r.authError(err, secretRef)
		}
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) authError(err error, secretRef string) error {
	if etcd.IsAuthFailed(err) || etcd.IsAuthRequired(err) {
		return &inputError{reason: v1alpha1.AuthFailedReason, message: fmt.Sprintf(
			"etcd refused root's credentials from Secret %s (%v); put root's password in it, or, with mutual client TLS, the operator resets it", secretRef, err)}
	}
	return fmt.Errorf("failed to bring etcd's authentication to spec.auth: %w", err)
}

// ensureGeneratedRootSecret creates root's password once; it is never
// rewritten, since etcd has it.
func (r *Reconciler) ensureGeneratedRootSecret(ctx context.Context, s *scope) error {
	name := v1alpha1.GeneratedRootSecretName(s.cluster.Name)
	existing := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: name}, existing)
	switch {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("failed to get Secret %s: %w", name, err)
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("failed to generate root's password: %w", err)
	}
	secret := r.ownedSecret(s, name, corev1.SecretTypeOpaque, map[string][]byte{
		etcdaccess.PasswordKey: []byte(base64.RawURLEncoding.EncodeToString(raw)),
	})
	if err := r.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create Secret %s: %w", name, err)
	}
	return nil
}
