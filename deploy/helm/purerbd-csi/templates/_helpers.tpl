{{/* The prefix of every object's name: purerbd-csi unless overridden. */}}
{{- define "purerbd.fullname" -}}
{{- .Values.fullnameOverride | default "purerbd-csi" | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; the selectors use only part-of and component. */}}
{{- define "purerbd.labels" -}}
app.kubernetes.io/part-of: purerbd
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "purerbd.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The controller's Secret for calls without secrets: the chart's unless named. */}}
{{- define "purerbd.secretName" -}}
{{ .Values.controllerSecret | default (required "secret.name is required" .Values.secret.name) }}
{{- end -}}

{{/* A Go program's memory limit, read from its container's limit. */}}
{{- define "purerbd.gomemlimit" -}}
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- end -}}
