{{- define "nats-sink.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "nats-sink.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "nats-sink.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nats-sink.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nats-sink.labels" -}}
{{ include "nats-sink.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "nats-sink.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "nats-sink.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "nats-sink.configMapName" -}}
{{- default (include "nats-sink.fullname" .) .Values.config.existingConfigMap -}}
{{- end -}}

{{/* The configuration document: config.inline, or config.example while inline is empty. */}}
{{- define "nats-sink.config" -}}
{{- if .Values.config.inline -}}
{{- toJson .Values.config.inline -}}
{{- else -}}
{{- toJson .Values.config.example -}}
{{- end -}}
{{- end -}}

{{/* delivery.shutdown_timeout_ms of the configuration, in ms. */}}
{{- define "nats-sink.shutdownTimeoutMs" -}}
{{- if .Values.config.existingConfigMap -}}
{{- int .Values.shutdownTimeoutMs -}}
{{- else -}}
{{- int (dig "delivery" "shutdown_timeout_ms" 20000 (include "nats-sink.config" . | fromJson)) -}}
{{- end -}}
{{- end -}}

{{- define "nats-sink.terminationGracePeriodSeconds" -}}
{{- if .Values.terminationGracePeriodSeconds -}}
{{- int .Values.terminationGracePeriodSeconds -}}
{{- else -}}
{{- add (div (int (include "nats-sink.shutdownTimeoutMs" .)) 1000) 10 -}}
{{- end -}}
{{- end -}}
