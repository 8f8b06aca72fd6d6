package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup/store"
	"github.com/quorumctl/etcd-operator/test/localcluster"
)

// S3CredentialsSecret is the name tests give their copy of the S3 server's
// credentials in their own namespace.
const S3CredentialsSecret = "s3-credentials"

// CopyS3Credentials copies the local cluster's S3 credentials Secret into
// ns, where EtcdSnapshots can name it.
func (e *Env) CopyS3Credentials(ctx context.Context, ns string) error {
	src, err := e.Clientset.CoreV1().Secrets(localcluster.S3Namespace).Get(ctx, localcluster.S3CredentialsSecret, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the local cluster has no S3 credentials (is its S3 server up?): %w", err)
	}
	_, err = e.Clientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: S3CredentialsSecret, Namespace: ns},
		Data:       src.Data,
	}, metav1.CreateOptions{})
	return err
}

// EnsureS3Bucket creates the local cluster's bucket unless it exists, for a
// suite whose node faults may have wiped the server's volume.
func (e *Env) EnsureS3Bucket(ctx context.Context) error {
	svc, err := e.Clientset.CoreV1().Services(localcluster.S3Namespace).Get(ctx, localcluster.S3Service, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the local cluster has no S3 Service: %w", err)
	}
	endpoint := fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, localcluster.S3Port)
	return WaitFor(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		err := localcluster.CreateBucket(ctx, endpoint, localcluster.S3AccessKeyID, localcluster.S3SecretAccessKey, localcluster.S3Bucket)
		return err == nil, err
	})
}

// S3Destination is the local cluster's bucket under prefix, as a snapshot
// Pod reaches it.
func S3Destination(prefix string) v1alpha1.SnapshotDestination {
	return v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{
		Endpoint: localcluster.S3Endpoint(), Bucket: localcluster.S3Bucket, Prefix: prefix,
		ForcePathStyle: true, CredentialsSecretName: S3CredentialsSecret,
		// The local cluster's S3 server speaks plain HTTP.
		Insecure: true,
	}}
}

// S3Store reaches the local cluster's bucket under prefix from the test
// host, through the S3 Service's address.
func (e *Env) S3Store(ctx context.Context, prefix string) (*store.S3, error) {
	svc, err := e.Clientset.CoreV1().Services(localcluster.S3Namespace).Get(ctx, localcluster.S3Service, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the local cluster has no S3 Service: %w", err)
	}
	return store.NewS3(ctx, store.S3Config{
		Endpoint: fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, localcluster.S3Port),
		Bucket:   localcluster.S3Bucket, Prefix: prefix, ForcePathStyle: true,
		AccessKeyID: localcluster.S3AccessKeyID, SecretAccessKey: localcluster.S3SecretAccessKey,
	})
}

// ObjectKeys lists the keys under the store's prefix.
func ObjectKeys(ctx context.Context, st store.Store) ([]string, error) {
	objs, err := st.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys, nil
}

// SnapshotKeys are the keys of snapshot objects (not their metadata).
func SnapshotKeys(keys []string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasSuffix(k, ".db") {
			out = append(out, k)
		}
	}
	return out
}

// WaitForSnapshot waits until the EtcdSnapshot ends, and returns it.
func WaitForSnapshot(ctx context.Context, c client.Client, ns, name string, timeout time.Duration) (*v1alpha1.EtcdSnapshot, error) {
	var s *v1alpha1.EtcdSnapshot
	err := WaitFor(ctx, timeout, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.EtcdSnapshot{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, got); err != nil {
			return false, err
		}
		s = got
		return got.Status.Phase.Terminal(), nil
	})
	if err != nil && s != nil {
		return s, fmt.Errorf("%w; snapshot %s is %s: %s", err, name, s.Status.Phase, describeConditions(s.Status.Conditions))
	}
	return s, err
}

// WaitForClusterCondition waits until the cluster's condition has the
// status and reason, and returns the cluster.
func WaitForClusterCondition(ctx context.Context, c client.Client, ns, name, condType string, status metav1.ConditionStatus, reason string, timeout time.Duration) (*v1alpha1.EtcdCluster, error) {
	var cl *v1alpha1.EtcdCluster
	err := WaitFor(ctx, timeout, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.EtcdCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, got); err != nil {
			return false, err
		}
		cl = got
		cond := meta.FindStatusCondition(got.Status.Conditions, condType)
		return cond != nil && cond.Status == status && cond.Reason == reason, nil
	})
	if err != nil && cl != nil {
		return cl, fmt.Errorf("%w; conditions: %s", err, describeConditions(cl.Status.Conditions))
	}
	return cl, err
}
