//go:build envtest

package v1alpha1_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/testenv"
)

var k8s client.Client

// TestMain starts a real kube-apiserver and etcd (the local cluster's own
// binaries, from KUBEBUILDER_ASSETS) with the generated CRDs installed, so
// every CEL rule is checked by the API server that enforces it in production.
func TestMain(m *testing.M) {
	testenv.Main(m, filepath.Join("..", ".."), func(cfg *rest.Config) error {
		scheme := runtime.NewScheme()
		_ = v1alpha1.AddToScheme(scheme)
		// The ratcheting test edits the CRDs.
		_ = apiextensionsv1.AddToScheme(scheme)
		var err error
		k8s, err = client.New(cfg, client.Options{Scheme: scheme})
		return err
	})
}

func newCluster(name string, mutate func(*v1alpha1.EtcdCluster)) *v1alpha1.EtcdCluster {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func TestCreateValidation(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*v1alpha1.EtcdCluster)
		message string
	}{
		{"negative replicas", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](-1) },
			"replicas cannot be negative"},
		{"version without patch", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.6" },
			"version must be an etcd release in MAJOR.MINOR.PATCH form, such as 3.6.16"},
		{"version with a v", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "v3.6.16" },
			"version must be an etcd release in MAJOR.MINOR.PATCH form, such as 3.6.16"},
		{"memory without size", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Medium = v1alpha1.StorageMediumMemory },
			"storage.size is required when storage.medium is Memory"},
		{"zero size", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = qty("0") },
			"storage.size must be at least 256Mi: etcd preallocates two 64 MB write-ahead log files"},
		{"size below the WAL's needs", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = qty("255Mi") },
			"storage.size must be at least 256Mi: etcd preallocates two 64 MB write-ahead log files"},
		{"memory size below the WAL's needs", func(c *v1alpha1.EtcdCluster) {
			c.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: qty("64Mi")}
		}, "storage.size must be at least 256Mi: etcd preallocates two 64 MB write-ahead log files"},
		{"memory cluster created paused", func(c *v1alpha1.EtcdCluster) {
			c.Spec.Replicas = ptr.To[int32](0)
			c.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: qty("256Mi")}
		}, "a Memory cluster cannot be paused (replicas: 0): its data lives only in the members' memory and would be lost"},
		{"unknown scheduling default", func(c *v1alpha1.EtcdCluster) { c.Spec.DefaultScheduling = "Sometimes" },
			"Unsupported value: \"Sometimes\""},
		{"no free share", func(c *v1alpha1.EtcdCluster) { c.Spec.Maintenance.Defrag.FreePercent = ptr.To[int32](0) },
			"maintenance.defrag.freePercent must be between 1 and 100: it is the share of the database file that must be free"},
		{"more than all of it free", func(c *v1alpha1.EtcdCluster) { c.Spec.Maintenance.Defrag.FreePercent = ptr.To[int32](101) },
			"maintenance.defrag.freePercent must be between 1 and 100"},
		{"quota share over 100", func(c *v1alpha1.EtcdCluster) { c.Spec.Maintenance.Defrag.QuotaPercent = ptr.To[int32](150) },
			"maintenance.defrag.quotaPercent must be between 1 and 100: it is how full the database file may get relative to the backend quota"},
		{"negative reclaim", func(c *v1alpha1.EtcdCluster) { c.Spec.Maintenance.Defrag.MinReclaim = qty("-1Mi") },
			"maintenance.defrag.minReclaim cannot be negative"},
		{"schedule of too few fields", func(c *v1alpha1.EtcdCluster) { c.Spec.Maintenance.Defrag.Schedule = "0 2 * *" },
			"maintenance.defrag.schedule must be a cron expression of 5 fields"},
		{"schedule of too many fields", func(c *v1alpha1.EtcdCluster) { c.Spec.Maintenance.Defrag.Schedule = "0 0 2 * * *" },
			"maintenance.defrag.schedule must be a cron expression of 5 fields"},
		{"unknown descriptor", func(c *v1alpha1.EtcdCluster) { c.Spec.Maintenance.Defrag.Schedule = "@fortnightly" },
			"maintenance.defrag.schedule must be a cron expression of 5 fields"},
		{"window without a schedule", func(c *v1alpha1.EtcdCluster) {
			c.Spec.Maintenance.Defrag.Window = &metav1.Duration{Duration: time.Hour}
		}, "maintenance.defrag.window needs maintenance.defrag.schedule: the window is counted from each tick of the schedule"},
		{"window too short", func(c *v1alpha1.EtcdCluster) {
			c.Spec.Maintenance.Defrag.Schedule = "@daily"
			c.Spec.Maintenance.Defrag.Window = &metav1.Duration{Duration: 10 * time.Second}
		}, "maintenance.defrag.window must be at least 1m"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), newCluster(fmt.Sprintf("create-%d", i), tc.mutate))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

func TestDefaults(t *testing.T) {
	g := NewWithT(t)
	c := newCluster("defaults", nil)
	g.Expect(k8s.Create(context.Background(), c)).To(Succeed())
	g.Expect(c.Spec.Replicas).To(Equal(ptr.To[int32](3)))
	g.Expect(c.Spec.Version).To(Equal(v1alpha1.DefaultEtcdVersion))
	g.Expect(c.Spec.ProgressDeadlineSeconds).To(Equal(ptr.To[int32](600)))
	g.Expect(c.Spec.Storage.Size).To(BeNil(), "no schema default, so a Memory cluster must name its size")
	d := c.Spec.Maintenance.Defrag
	g.Expect(d.Enabled).To(Equal(ptr.To(true)))
	g.Expect(d.FreePercent).To(Equal(ptr.To[int32](v1alpha1.DefaultDefragFreePercent)))
	g.Expect(d.QuotaPercent).To(Equal(ptr.To[int32](v1alpha1.DefaultDefragQuotaPercent)))
	g.Expect(d.MinReclaim.Cmp(v1alpha1.DefaultDefragMinReclaim)).To(Equal(0))
	g.Expect(d.Schedule).To(BeEmpty())
	g.Expect(c.Spec.Maintenance.NoSpaceRecovery.Enabled).To(Equal(ptr.To(true)))
}

func TestMaintenanceAccepted(t *testing.T) {
	g := NewWithT(t)
	for i, schedule := range []string{"0 2 * * *", "*/15 1-5 * * MON-FRI", "@daily", "@every 6h", "CRON_TZ=Europe/Berlin 30 3 * * SUN", "TZ=UTC 0 0 1 * *"} {
		c := newCluster(fmt.Sprintf("schedule-%d", i), func(c *v1alpha1.EtcdCluster) {
			c.Spec.Maintenance.Defrag.Schedule = schedule
			c.Spec.Maintenance.Defrag.Window = &metav1.Duration{Duration: 90 * time.Minute}
			c.Spec.Maintenance.Defrag.MinReclaim = qty("0")
			c.Spec.Maintenance.Defrag.Enabled = ptr.To(false)
			c.Spec.Maintenance.NoSpaceRecovery.Enabled = ptr.To(false)
		})
		g.Expect(k8s.Create(context.Background(), c)).To(Succeed(), schedule)
	}
}

func TestUpdateValidation(t *testing.T) {
	cases := []struct {
		name    string
		create  func(*v1alpha1.EtcdCluster)
		update  func(*v1alpha1.EtcdCluster)
		message string
	}{
		{"shrink size", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = qty("2Gi") },
			func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = qty("1Gi") }, "storage.size cannot shrink"},
		{"remove size", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = qty("2Gi") },
			func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = nil }, "storage.size cannot shrink"},
		{"medium to memory", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = qty("1Gi") },
			func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Medium = v1alpha1.StorageMediumMemory },
			"storage.medium cannot be changed after creation"},
		{"memory to volume", func(c *v1alpha1.EtcdCluster) {
			c.Spec.Storage.Size = qty("256Mi")
			c.Spec.Storage.Medium = v1alpha1.StorageMediumMemory
		}, func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Medium = "" },
			"storage.medium cannot be changed after creation"},
		{"pause a memory cluster", func(c *v1alpha1.EtcdCluster) {
			c.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: qty("256Mi")}
		}, func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](0) },
			"a Memory cluster cannot be paused (replicas: 0): its data lives only in the members' memory and would be lost"},
		{"shrink size while changing class", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = qty("2Gi") },
			func(c *v1alpha1.EtcdCluster) {
				c.Spec.Storage.Size = qty("1Gi")
				c.Spec.Storage.StorageClassName = ptr.To("fast")
			}, "storage.size cannot shrink"},
		{"memory onto a class", func(c *v1alpha1.EtcdCluster) {
			c.Spec.Storage = v1alpha1.StorageSpec{Medium: v1alpha1.StorageMediumMemory, Size: qty("256Mi")}
		}, func(c *v1alpha1.EtcdCluster) {
			c.Spec.Storage.Medium = ""
			c.Spec.Storage.StorageClassName = ptr.To("fast")
		}, "storage.medium cannot be changed after creation"},
		{"skip a minor upwards", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.5.35" },
			func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.7.3" }, skippedMinor},
		{"skip a minor downwards", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.7.3" },
			func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.5.35" }, skippedMinor},
		{"another major", nil, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "4.0.0" }, skippedMinor},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			c := newCluster(fmt.Sprintf("update-%d", i), tc.create)
			g.Expect(k8s.Create(ctx, c)).To(Succeed())
			tc.update(c)
			err := k8s.Update(ctx, c)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

const skippedMinor = "spec.version may change by one minor release at a time (3.5 to 3.6, then 3.6 to 3.7): etcd supports neither upgrades nor downgrades that skip a minor"

func TestAllowedUpdates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newCluster("allowed", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = qty("1Gi") })
	g.Expect(k8s.Create(ctx, c)).To(Succeed())
	c.Spec.Storage.Size = qty("2Gi")
	c.Spec.Replicas = ptr.To[int32](5)
	c.Spec.Version = "3.7.3"
	g.Expect(k8s.Update(ctx, c)).To(Succeed(), "growing storage, scaling and changing version are allowed")
	c.Spec.Version = "3.7.4"
	g.Expect(k8s.Update(ctx, c)).To(Succeed(), "a patch release")
	c.Spec.Version = "3.6.16"
	g.Expect(k8s.Update(ctx, c)).To(Succeed(), "one minor down gets past admission; the operator judges it against what the members run")
	c.Spec.Storage.StorageClassName = ptr.To("fast")
	g.Expect(k8s.Update(ctx, c)).To(Succeed(), "setting a storage class: the members move to it by replacement")
	c.Spec.Storage.StorageClassName = ptr.To("slow")
	g.Expect(k8s.Update(ctx, c)).To(Succeed(), "changing it")
	c.Spec.Storage.StorageClassName = nil
	g.Expect(k8s.Update(ctx, c)).To(Succeed(), "back to the default class")
	c.Spec.Maintenance.Defrag.Schedule = "@weekly"
	c.Spec.Maintenance.Defrag.FreePercent = ptr.To[int32](50)
	g.Expect(k8s.Update(ctx, c)).To(Succeed(), "the maintenance settings may change at any time")
}
