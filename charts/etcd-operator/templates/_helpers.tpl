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
