//go:build envtest

package rbac_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/rbac"
)

const (
	watched   = "tenant-a"
	unwatched = "tenant-b"
)

var operatorUser = "system:serviceaccount:" + namespace + ":" + release

func operatorGroups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}

var (
	installOnce sync.Once
	installErr  error
)

// installChart renders the chart with watchNamespaces set to one namespace
// and creates its access control on the API server: roles, bindings, the
// EtcdMember admission policy. Nothing runs the operator.
func installChart(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	admin, err := client.New(apiserver, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	installOnce.Do(func() {
		ctx := context.Background()
		for _, ns := range []string{namespace, watched, unwatched, "kube-node-lease"} {
			err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				installErr = err
				return
			}
		}
		objs, err := rbac.Render(root, release, namespace, "--set", "watchNamespaces={"+watched+"}")
		if err != nil {
			installErr = err
			return
		}
		for _, o := range objs {
			switch o.GetKind() {
			case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
				"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ServiceAccount":
				if err := admin.Create(ctx, o); err != nil {
					installErr = err
					return
				}
			}
		}
	})
	if installErr != nil {
		t.Fatal(installErr)
	}
	return admin
}

// TestRenderedGrantsOnAPIServer asks the API server (SubjectAccessReview)
// whether the operator's ServiceAccount may do what its code needs: in the
// watched namespace yes, in an unwatched one and cluster-wide no, the
// kubelets' Leases in kube-node-lease only, and the cluster-scoped kinds
// everywhere. It also checks the chart's split against the API server's
// own scope of each kind.
func TestRenderedGrantsOnAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	installChart(t)
	perms, where := needed(t)
	cs, err := kubernetes.NewForConfig(apiserver)
	g.Expect(err).NotTo(HaveOccurred())
	httpClient, err := rest.HTTPClientFor(apiserver)
	g.Expect(err).NotTo(HaveOccurred())
	mapper, err := apiutil.NewDynamicRESTMapper(apiserver, httpClient)
	g.Expect(err).NotTo(HaveOccurred())

	allowed := func(p rbac.Permission, ns string) bool {
		resource, sub, _ := strings.Cut(p.Resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: operatorUser, Groups: operatorGroups(),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Group: p.Group, Resource: resource, Subresource: sub, Verb: p.Verb,
			},
		}}
		out, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return out.Status.Allowed
	}
	namespaced := func(p rbac.Permission) bool {
		resource, _, _ := strings.Cut(p.Resource, "/")
		gvk, err := mapper.KindFor(schema.GroupVersionResource{Group: p.Group, Resource: resource})
		if meta.IsNoMatchError(err) && p.Group == "cert-manager.io" {
			// cert-manager is not installed here; its Certificates are namespaced.
			return true
		}
		g.Expect(err).NotTo(HaveOccurred(), "%s", p)
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		g.Expect(err).NotTo(HaveOccurred(), "%s", p)
		return m.Scope.Name() == meta.RESTScopeNameNamespace
	}

	g.Expect(perms).NotTo(BeEmpty())
	for _, p := range perms {
		switch {
		case p.Group == "coordination.k8s.io" && p.Resource == "leases":
			g.Expect(allowed(p, "kube-node-lease")).To(BeTrue(), "%s in kube-node-lease (%s)", p, where[p])
			g.Expect(allowed(p, unwatched)).To(BeFalse(), "%s in %s", p, unwatched)
		case namespaced(p):
			g.Expect(allowed(p, watched)).To(BeTrue(), "%s in %s (%s)", p, watched, where[p])
			g.Expect(allowed(p, unwatched)).To(BeFalse(), "%s in %s", p, unwatched)
			g.Expect(allowed(p, "")).To(BeFalse(), "%s cluster-wide", p)
		default:
			g.Expect(allowed(p, "")).To(BeTrue(), "%s cluster-wide (%s)", p, where[p])
		}
	}
	create := rbac.Permission{Resource: "pods", Verb: "create"}
	g.Expect(allowed(create, watched)).To(BeTrue())
	g.Expect(allowed(create, unwatched)).To(BeFalse(), "the operator must not create Pods in a namespace it does not watch")
}

// TestMemberSpecIsTheOperators: the chart's ValidatingAdmissionPolicy
// refuses writes of EtcdMember spec from anyone but the operator's
// ServiceAccount, here a user RBAC lets do anything to EtcdMembers, while
// the operator's own writes pass; metadata stays writable. The CRD's rules
// still keep the operator itself from changing a member's identity.
func TestMemberSpecIsTheOperators(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	admin := installChart(t)
	const user = "tenant-admin"
	policyMessage := "EtcdMember spec is written by the etcd operator only (" + operatorUser + ")"

	g.Expect(admin.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "members", Namespace: watched},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"etcdmembers"}, Verbs: []string{"*"}}},
	})).To(Succeed())
	g.Expect(admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "members", Namespace: watched},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "members"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})).To(Succeed())
	as := func(name string, groups []string) client.Client {
		cfg := rest.CopyConfig(apiserver)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: groups}
		c, err := client.New(cfg, client.Options{Scheme: admin.Scheme()})
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	operator, tenant := as(operatorUser, operatorGroups()), as(user, []string{"system:authenticated"})

	member := func(name string) *v1alpha1.EtcdMember {
		return &v1alpha1.EtcdMember{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: watched},
			Spec: v1alpha1.EtcdMemberSpec{
				ClusterName: "c", ClusterToken: "c-token",
				PeerURL: "http://" + name + ".c." + watched + ".svc:2380", ClientURL: "http://" + name + ".c." + watched + ".svc:2379",
			},
		}
	}
	m := member("c-operators")
	g.Expect(operator.Create(ctx, m)).To(Succeed(), "the operator creates members")

	t.Log("a tenant's create is refused once the policy is in force")
	g.Eventually(func() string {
		err := tenant.Create(ctx, member("c-tenants"))
		if err == nil {
			_ = admin.Delete(ctx, member("c-tenants"))
			return "admitted"
		}
		return err.Error()
	}).WithTimeout(30 * time.Second).Should(ContainSubstring(policyMessage))

	t.Log("a tenant's spec patch is refused, whatever the field")
	for _, edit := range []func(*v1alpha1.EtcdMember){
		func(m *v1alpha1.EtcdMember) { m.Spec.ForceNewCluster = true },
		func(m *v1alpha1.EtcdMember) { m.Spec.InitialCluster = "c-operators=http://attacker.example:2380" },
		func(m *v1alpha1.EtcdMember) { m.Spec.Version = "3.6.0" },
	} {
		patch := client.MergeFrom(m.DeepCopy())
		edited := m.DeepCopy()
		edit(edited)
		err := tenant.Patch(ctx, edited, patch)
		g.Expect(err).To(HaveOccurred())
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring(policyMessage))
	}

	t.Log("a tenant may still label the member")
	patch := client.MergeFrom(m.DeepCopy())
	m.Labels = map[string]string{"team": "a"}
	g.Expect(tenant.Patch(ctx, m, patch)).To(Succeed())

	t.Log("the operator's own spec writes pass, but not a change of identity")
	patch = client.MergeFrom(m.DeepCopy())
	m.Spec.ForceNewCluster = true
	g.Expect(operator.Patch(ctx, m, patch)).To(Succeed())
	patch = client.MergeFrom(m.DeepCopy())
	redirected := m.DeepCopy()
	redirected.Spec.ClientURL = "http://attacker.example:2379"
	err := operator.Patch(ctx, redirected, patch)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.clientURL cannot be changed once set"))
}
