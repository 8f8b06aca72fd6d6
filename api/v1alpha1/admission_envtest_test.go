//go:build envtest

package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// The admission rules of docs/design/0017-admission-rules.md, each against
// the object users write it in, with the message the API server answers.

const (
	replicasMessage       = "replicas must be at most 9: every etcd write waits for a majority of the members"
	labelsMessage         = "additionalMetadata.labels must not use the prefix etcd.quorumctl.io/"
	annotationsMessage    = "additionalMetadata.annotations must not use the prefix etcd.quorumctl.io/: the operator acts on its own annotations of member Pods"
	imageMessage          = "imageRepository must be a repository without a tag or digest, such as gcr.io/etcd-development/etcd: the operator appends :v<version> itself"
	httpsMessage          = "s3.endpoint must be https:// unless s3.insecure is true"
	userInfoMessage       = "s3.endpoint must not carry credentials (user:password@)"
	hostMessage           = "s3.endpoint must be a URL that names a host"
	endpointLengthMessage = "spec.destination.s3.endpoint: Too long:"
	secretMessage         = "s3.credentialsSecretName must be the name of a Secret"
	configMapMessage      = "s3.caBundle.configMapName must be the name of a ConfigMap"
	claimMessage          = "persistentVolumeClaim.claimName must be the name of a PersistentVolumeClaim"
	tlsSecretMessage      = "tls secretName must be the name of a Secret"
)

func httpsDest() *v1alpha1.S3Destination {
	return &v1alpha1.S3Destination{Endpoint: "https://s3.example", Bucket: "backups", CredentialsSecretName: "creds"}
}

func withS3(mutate func(*v1alpha1.S3Destination)) func(*v1alpha1.EtcdSnapshot) {
	return func(s *v1alpha1.EtcdSnapshot) {
		s.Spec.Destination = v1alpha1.SnapshotDestination{S3: httpsDest()}
		mutate(s.Spec.Destination.S3)
	}
}

func withMetadata(labels, annotations map[string]string) func(*v1alpha1.EtcdCluster) {
	return func(c *v1alpha1.EtcdCluster) {
		c.Spec.AdditionalMetadata = &v1alpha1.AdditionalMetadata{Labels: labels, Annotations: annotations}
	}
}

func secretTLS(name string) func(*v1alpha1.EtcdCluster) {
	return func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{
			Source: v1alpha1.CertificateSourceSecret, SecretName: name}}}
	}
}

func restoreFrom(mutate func(*v1alpha1.S3Destination)) func(*v1alpha1.EtcdCluster) {
	d := httpsDest()
	mutate(d)
	return withRestore(&v1alpha1.RestoreSpec{Source: &v1alpha1.RestoreSource{S3: d, Key: "ns/c/snap.db"}})
}

func TestAdmissionRules(t *testing.T) {
	// Each case is one object; message "" means it is admitted.
	type object struct {
		cluster  func(*v1alpha1.EtcdCluster)
		snapshot func(*v1alpha1.EtcdSnapshot)
		schedule func(*v1alpha1.EtcdSnapshotSchedule)
	}
	cases := []struct {
		name    string
		object  object
		message string
	}{
		// replicas
		{"ten replicas", object{cluster: func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](10) }}, replicasMessage},
		{"nine replicas", object{cluster: func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](9) }}, ""},

		// additionalMetadata
		{"label under the operator's prefix", object{cluster: withMetadata(map[string]string{v1alpha1.ClusterLabel: "other"}, nil)}, labelsMessage},
		{"role label", object{cluster: withMetadata(map[string]string{v1alpha1.RoleLabel: v1alpha1.RoleLabelVoter}, nil)}, labelsMessage},
		{"force-new-cluster annotation", object{cluster: withMetadata(nil, map[string]string{"etcd.quorumctl.io/force-new-cluster": "true"})}, annotationsMessage},
		{"template-hash annotation", object{cluster: withMetadata(nil, map[string]string{"etcd.quorumctl.io/template-hash": "x"})}, annotationsMessage},
		{"the user's own keys", object{cluster: withMetadata(map[string]string{"team": "db", "example.com/etcd.quorumctl.io": "x"},
			map[string]string{"quorumctl.io/note": "y"})}, ""},

		// imageRepository
		{"image with a tag", object{cluster: func(c *v1alpha1.EtcdCluster) { c.Spec.ImageRepository = "gcr.io/etcd-development/etcd:v3.6.16" }}, imageMessage},
		{"image with a digest", object{cluster: func(c *v1alpha1.EtcdCluster) {
			c.Spec.ImageRepository = "gcr.io/etcd-development/etcd@sha256:" + strings.Repeat("a", 64)
		}}, imageMessage},
		{"image of one name with a tag", object{cluster: func(c *v1alpha1.EtcdCluster) { c.Spec.ImageRepository = "etcd:latest" }}, imageMessage},
		{"image from a registry with a port", object{cluster: func(c *v1alpha1.EtcdCluster) { c.Spec.ImageRepository = "registry.example:5000/mirror/etcd" }}, ""},

		// s3.endpoint, in each object users write a destination in
		{"snapshot over http", object{snapshot: withS3(func(d *v1alpha1.S3Destination) { d.Endpoint = "http://s3.example:7070" })}, httpsMessage},
		{"snapshot over http, allowed", object{snapshot: withS3(func(d *v1alpha1.S3Destination) {
			d.Endpoint, d.Insecure = "http://s3.example:7070", true
		})}, ""},
		{"snapshot to AWS's default endpoint", object{snapshot: withS3(func(d *v1alpha1.S3Destination) { d.Endpoint = "" })}, ""},
		{"schedule over http", object{schedule: func(s *v1alpha1.EtcdSnapshotSchedule) {
			s.Spec.Destination = v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{Endpoint: "http://s3.example", Bucket: "backups"}}
		}}, httpsMessage},
		{"schedule over http, allowed", object{schedule: func(s *v1alpha1.EtcdSnapshotSchedule) {
			s.Spec.Destination = v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{Endpoint: "http://s3.example", Bucket: "backups", Insecure: true}}
		}}, ""},
		{"restore over http", object{cluster: restoreFrom(func(d *v1alpha1.S3Destination) { d.Endpoint = "http://s3.example" })}, httpsMessage},
		{"restore over http, allowed", object{cluster: restoreFrom(func(d *v1alpha1.S3Destination) {
			d.Endpoint, d.Insecure = "http://s3.example", true
		})}, ""},
		{"endpoint with user and password", object{snapshot: withS3(func(d *v1alpha1.S3Destination) { d.Endpoint = "https://key:secret@s3.example" })}, userInfoMessage},
		{"endpoint with a user", object{snapshot: withS3(func(d *v1alpha1.S3Destination) {
			d.Endpoint, d.Insecure = "http://key@s3.example:7070/", true
		})}, userInfoMessage},
		{"restore endpoint with credentials", object{cluster: restoreFrom(func(d *v1alpha1.S3Destination) { d.Endpoint = "https://k:s@s3.example" })}, userInfoMessage},
		{"endpoint without a host", object{snapshot: withS3(func(d *v1alpha1.S3Destination) { d.Endpoint = "https://" })}, hostMessage},
		{"endpoint with only a port", object{snapshot: withS3(func(d *v1alpha1.S3Destination) { d.Endpoint = "https://:443" })}, hostMessage},
		{"endpoint too long", object{snapshot: withS3(func(d *v1alpha1.S3Destination) {
			d.Endpoint = "https://s3.example/" + strings.Repeat("a", 500)
		})}, endpointLengthMessage},

		// names of Secrets, ConfigMaps and claims
		{"credentials Secret with upper case", object{snapshot: withS3(func(d *v1alpha1.S3Destination) { d.CredentialsSecretName = "S3-Creds" })}, secretMessage},
		{"credentials Secret with a slash", object{snapshot: withS3(func(d *v1alpha1.S3Destination) { d.CredentialsSecretName = "../creds" })}, secretMessage},
		{"CA ConfigMap with a space", object{snapshot: withS3(func(d *v1alpha1.S3Destination) {
			d.CABundle = &v1alpha1.CABundleReference{ConfigMapName: "ca bundle"}
		})}, configMapMessage},
		{"claim with an underscore", object{snapshot: func(s *v1alpha1.EtcdSnapshot) {
			s.Spec.Destination = v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "my_claim"}}
		}}, claimMessage},
		{"schedule claim ending in a dash", object{schedule: func(s *v1alpha1.EtcdSnapshotSchedule) {
			s.Spec.Destination.PersistentVolumeClaim.ClaimName = "snapshots-"
		}}, claimMessage},
		{"restore credentials Secret with upper case", object{cluster: restoreFrom(func(d *v1alpha1.S3Destination) { d.CredentialsSecretName = "Creds" })}, secretMessage},
		{"TLS Secret with upper case", object{cluster: secretTLS("Peer-TLS")}, tlsSecretMessage},
		{"names in DNS-1123 form", object{snapshot: withS3(func(d *v1alpha1.S3Destination) {
			d.CredentialsSecretName = "s3.creds-1"
			d.CABundle = &v1alpha1.CABundleReference{ConfigMapName: "ca.bundle"}
		})}, ""},
		{"TLS Secret in DNS-1123 form", object{cluster: secretTLS("peer-tls.v2")}, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			name := fmt.Sprintf("admission-%d", i)
			var obj client.Object
			switch o := tc.object; {
			case o.cluster != nil:
				obj = newCluster(name, o.cluster)
			case o.snapshot != nil:
				obj = newSnapshot(name, o.snapshot)
			default:
				obj = newSchedule(name, o.schedule)
			}
			err := k8s.Create(context.Background(), obj)
			if tc.message == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}
