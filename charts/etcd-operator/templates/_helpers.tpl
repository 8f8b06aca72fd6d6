{{/*
Name of the chart, used as app.kubernetes.io/name.
*/}}
{{- define "etcd-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name of the release's objects: the release name when it
already contains the chart name, else "<release>-<chart>".
*/}}
{{- define "etcd-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
Labels every object of the chart carries.
*/}}
{{- define "etcd-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "etcd-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Labels selecting the operator's Pods. The e2e suite finds the operator by
app.kubernetes.io/name=etcd-operator.
*/}}
{{- define "etcd-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "etcd-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The selector labels as key=value pairs separated by commas, sorted by key,
for OPERATOR_POD_LABELS.
*/}}
{{- define "etcd-operator.selectorLabelList" -}}
{{- $pairs := list }}
{{- range $k, $v := include "etcd-operator.selectorLabels" . | fromYaml }}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/*
The operator image reference.
*/}}
{{- define "etcd-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}

{{/*
WATCH_NAMESPACES: a list is joined with commas, a string is passed as is.
*/}}
{{- define "etcd-operator.watchNamespaces" -}}
{{- if kindIs "string" .Values.watchNamespaces }}
{{- .Values.watchNamespaces }}
{{- else }}
{{- join "," (.Values.watchNamespaces | default list) }}
{{- end }}
{{- end }}

{{/*
The rules of the operator's ClusterRole, as a YAML list, read from
files/rbac-role.yaml which make manifests generates from the
+kubebuilder:rbac markers. The file may hold several documents; rules of
every ClusterRole are used. A missing file, or one without rules, gives an
empty list. A namespaced Role (a marker with namespace=) cannot be mapped
onto this chart and fails the render instead of silently granting nothing.
*/}}
{{- define "etcd-operator.generatedRules" -}}
{{- $rules := list }}
{{- $content := .Files.Get "files/rbac-role.yaml" }}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" $content -1 }}
{{- $obj := fromYaml $doc }}
{{- if hasKey $obj "Error" }}
{{- fail (printf "files/rbac-role.yaml is not valid YAML: %v" $obj.Error) }}
{{- end }}
{{- $kind := get $obj "kind" }}
{{- if eq $kind "ClusterRole" }}
{{- $rules = concat $rules ($obj.rules | default list) }}
{{- else if $kind }}
{{- fail (printf "files/rbac-role.yaml holds a %s; only ClusterRole rules are supported (no namespace= in +kubebuilder:rbac markers)" $kind) }}
{{- end }}
{{- end }}
{{- toYaml $rules }}
{{- end }}

{{/*
Where each generated rule is granted. The operator's rules are split by
resource into three lists, as YAML under the keys cluster, namespaced and
nodeLease:
- cluster: cluster-scoped kinds (nodes, persistent volumes, storage classes,
  and the reviews the metrics endpoint asks), always in the ClusterRole;
- nodeLease: the kubelets' Leases, read in kube-node-lease only (a Role);
- namespaced: everything else, in the ClusterRole when every namespace is
  watched, else in a Role in each watched namespace.
A resource the chart does not know as cluster-scoped is taken as namespaced;
test/rbac checks the split against a real API server.
*/}}
{{- define "etcd-operator.ruleSets" -}}
{{- $clusterScoped := list "/nodes" "/persistentvolumes" "storage.k8s.io/storageclasses" "authentication.k8s.io/tokenreviews" "authorization.k8s.io/subjectaccessreviews" }}
{{- $nodeLease := list "coordination.k8s.io/leases" }}
{{- $sets := dict "cluster" (list) "namespaced" (list) "nodeLease" (list) }}
{{- range $rule := include "etcd-operator.generatedRules" . | fromYamlArray }}
{{- range $group := $rule.apiGroups }}
{{- range $resource := $rule.resources }}
{{- $key := printf "%s/%s" $group (regexReplaceAll "/.*$" $resource "") }}
{{- $set := "namespaced" }}
{{- if has $key $clusterScoped }}{{ $set = "cluster" }}{{ end }}
{{- if has $key $nodeLease }}{{ $set = "nodeLease" }}{{ end }}
{{- $one := dict "apiGroups" (list $group) "resources" (list $resource) "verbs" $rule.verbs }}
{{- $_ := set $sets $set (append (get $sets $set) $one) }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $sets }}
{{- end }}

{{/*
The watched namespaces as a list; empty means every namespace.
*/}}
{{- define "etcd-operator.watchNamespaceList" -}}
{{- $out := list }}
{{- range splitList "," (include "etcd-operator.watchNamespaces" .) }}
{{- $ns := trim . }}
{{- if and $ns (not (has $ns $out)) }}{{ $out = append $out $ns }}{{ end }}
{{- end }}
{{- toYaml $out }}
{{- end }}
