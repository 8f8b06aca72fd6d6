package setup

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/internal/component/netpol"
)

// Environment variables of the clusters' NetworkPolicy settings, read as
// fallbacks for the flags of the same meaning. The chart sets the first from
// the downward API and the second from its selector labels.
const (
	EnvOperatorNamespace        = "OPERATOR_NAMESPACE"
	EnvOperatorPodLabels        = "OPERATOR_POD_LABELS"
	EnvMetricsNamespaceSelector = "METRICS_NAMESPACE_SELECTOR"
)

// NetworkPolicySources turns the flags into what every cluster's
// NetworkPolicy admits besides the cluster's own Pods. podLabels is a list
// of key=value pairs; metricsSelector is a label selector in kubectl's -l
// syntax. Empty values leave their part out (see netpol.Sources).
func NetworkPolicySources(namespace, podLabels, metricsSelector string) (netpol.Sources, error) {
	src := netpol.Sources{OperatorNamespace: strings.TrimSpace(namespace)}
	if podLabels = strings.TrimSpace(podLabels); podLabels != "" {
		l, err := labels.ConvertSelectorToLabelsMap(podLabels)
		if err != nil {
			return netpol.Sources{}, fmt.Errorf("--operator-pod-labels must be key=value pairs separated by commas: %w", err)
		}
		if src.OperatorNamespace == "" {
			return netpol.Sources{}, fmt.Errorf("--operator-pod-labels needs --operator-namespace: labels alone cannot say where the operator runs")
		}
		src.OperatorPodLabels = l
	}
	if metricsSelector = strings.TrimSpace(metricsSelector); metricsSelector != "" {
		sel, err := metav1.ParseToLabelSelector(metricsSelector)
		if err != nil {
			return netpol.Sources{}, fmt.Errorf("--metrics-namespace-selector is not a label selector: %w", err)
		}
		if len(sel.MatchLabels) == 0 {
			sel.MatchLabels = nil
		}
		src.MetricsNamespaces = sel
	}
	return src, nil
}

// MayWatch asks the API server, as the operator, whether it may list and
// watch resource wherever it watches clusters: in every namespace, or in
// each of namespaces. A watch the operator may not open fails its
// controller's start, and with it the whole manager; asking first lets the
// operator run without it instead. denied names the first refusal.
// Creating a SelfSubjectAccessReview is open to every authenticated user
// (the system:basic-user role), so it needs no rule of its own.
func MayWatch(ctx context.Context, c client.Client, gr schema.GroupResource, namespaces []string) (allowed bool, denied string, err error) {
	scopes := namespaces
	if len(scopes) == 0 {
		scopes = []string{""}
	}
	for _, ns := range scopes {
		for _, verb := range []string{"list", "watch"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: gr.Group, Resource: gr.Resource},
			}}
			if err := c.Create(ctx, review); err != nil {
				return false, "", fmt.Errorf("failed to ask whether the operator may %s %s: %w", verb, gr, err)
			}
			if !review.Status.Allowed {
				where := "in all namespaces"
				if ns != "" {
					where = "in namespace " + ns
				}
				return false, fmt.Sprintf("%s %s %s", verb, gr, where), nil
			}
		}
	}
	return true, "", nil
}
