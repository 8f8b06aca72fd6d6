package etcdcluster

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/certs"
)

func certificateName(cluster, section string) string { return cluster + "-" + section }

func certManagerSecretName(cluster, section string) string {
	return cluster + "-" + section + "-certmanager"
}

// ensureCertificate keeps one cert-manager Certificate per section for the
// whole cluster: its names cover every member through a wildcard for the
// peer Service's domain, so it exists before any member does, and a new
// member needs no new issuance. Its Secret carries the cluster's label, so
// the operator's label-filtered cache sees it.
func (r *Reconciler) ensureCertificate(ctx context.Context, s *scope, section string, issuer *v1alpha1.IssuerReference) error {
	c := s.cluster
	peerSvc, clientSvc := v1alpha1.PeerServiceName(c.Name), v1alpha1.ClientServiceName(c.Name)
	domain := strings.TrimSuffix(r.clusterDomain(), ".")
	dns := []string{
		fmt.Sprintf("*.%s.%s.svc.%s", peerSvc, c.Namespace, domain),
		fmt.Sprintf("*.%s.%s.svc", peerSvc, c.Namespace),
	}
	dns = append(dns, certs.ServiceNames(peerSvc, c.Namespace, domain)...)
	dns = append(dns, certs.ServiceNames(clientSvc, c.Namespace, domain)...)
	dns = append(dns, "localhost")
	kind, group := issuerKind(issuer), issuerGroup(issuer)
	desired := cmapi.CertificateSpec{
		SecretName:     certManagerSecretName(c.Name, section),
		SecretTemplate: &cmapi.CertificateSecretTemplate{Labels: v1alpha1.ClusterLabels(c.Name)},
		CommonName:     fmt.Sprintf("%s.%s.%s.svc", peerSvc, c.Namespace, section),
		DNSNames:       dns,
		IPAddresses:    []string{"127.0.0.1", "::1"},
		Usages:         []cmapi.KeyUsage{cmapi.UsageDigitalSignature, cmapi.UsageKeyEncipherment, cmapi.UsageServerAuth, cmapi.UsageClientAuth},
		PrivateKey:     &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256, RotationPolicy: cmapi.RotationPolicyAlways},
		IssuerRef:      cmmeta.IssuerReference{Name: issuer.Name, Kind: kind, Group: group},
	}
	name := certificateName(c.Name, section)
	existing := &cmapi.Certificate{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
		cert := &cmapi.Certificate{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: v1alpha1.ClusterLabels(c.Name)},
			Spec:       desired,
		}
		if err := controllerutil.SetControllerReference(c, cert, r.Scheme()); err != nil {
			return err
		}
		if err := r.Create(ctx, cert); err != nil {
			return fmt.Errorf("failed to create cert-manager Certificate %s: %w", name, err)
		}
		return nil
	case meta.IsNoMatchError(err):
		return &sourceInvalidError{message: "spec.tls." + section + ".source is CertManager, but cert-manager's Certificate kind is not installed in this cluster"}
	case err != nil:
		return fmt.Errorf("failed to get cert-manager Certificate %s: %w", name, err)
	}
	if !metav1.IsControlledBy(existing, c) {
		return &sourceInvalidError{message: fmt.Sprintf("cert-manager Certificate %s/%s exists but does not belong to EtcdCluster %s; delete or rename it", c.Namespace, name, c.Name)}
	}
	if failed := failedCondition(existing); failed != "" {
		s.tls.pending = fmt.Sprintf("cert-manager Certificate %s/%s is not ready: %s", c.Namespace, name, failed)
	}
	if equality.Semantic.DeepEqual(existing.Spec, desired) {
		return nil
	}
	patch := client.MergeFrom(existing.DeepCopy())
	existing.Spec = desired
	if err := r.Patch(ctx, existing, patch); err != nil {
		return fmt.Errorf("failed to update cert-manager Certificate %s: %w", name, err)
	}
	return nil
}

func issuerKind(issuer *v1alpha1.IssuerReference) string {
	if issuer.Kind == "" {
		return cmapi.IssuerKind
	}
	return issuer.Kind
}

func issuerGroup(issuer *v1alpha1.IssuerReference) string {
	if issuer.Group == "" {
		return "cert-manager.io"
	}
	return issuer.Group
}

// issuedBy: cert-manager's Secret was issued by issuer, as the annotations
// cert-manager writes on it say. A Secret without them (written by an
// older cert-manager, or by hand) is taken as the issuer's.
func issuedBy(secret *corev1.Secret, issuer *v1alpha1.IssuerReference) bool {
	a := secret.Annotations
	for key, want := range map[string]string{
		cmapi.IssuerNameAnnotationKey: issuer.Name, cmapi.IssuerKindAnnotationKey: issuerKind(issuer), cmapi.IssuerGroupAnnotationKey: issuerGroup(issuer),
	} {
		if got, ok := a[key]; ok && got != want {
			return false
		}
	}
	return true
}

func failedCondition(c *cmapi.Certificate) string {
	for _, cond := range c.Status.Conditions {
		if cond.Type == cmapi.CertificateConditionReady && cond.Status == cmmeta.ConditionFalse {
			return cond.Reason + ": " + cond.Message
		}
	}
	return ""
}

func (r *Reconciler) clusterDomain() string {
	if r.ClusterDomain != "" {
		return r.ClusterDomain
	}
	return "cluster.local"
}

// hostOf is a URL's host name.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
