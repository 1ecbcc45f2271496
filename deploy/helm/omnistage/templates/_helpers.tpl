{{/*
omnistage.name is the chart's name, or nameOverride.
*/}}
{{- define "omnistage.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
omnistage.fullname prefixes every object's name: fullnameOverride, or the
release name when it already holds the chart's name, else
"<release>-<chart>". It is the front end's name; a stage's objects are
"<fullname>-<stage>".
*/}}
{{- define "omnistage.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
omnistage.chart is "<chart>-<version>" for the helm.sh/chart label.
*/}}
{{- define "omnistage.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
omnistage.selectorLabels selects the pods of one component ("frontend" or
"stage-<name>") of this release. Takes (dict "root" $ "component" C).
*/}}
{{- define "omnistage.selectorLabels" -}}
app.kubernetes.io/name: {{ include "omnistage.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
omnistage.labels are the labels of every object of one component: the
selector labels, the chart's, and omnistage/role ("frontend" or "stage"),
which the NetworkPolicy selects on. Takes (dict "root" $ "component" C
"role" R).
*/}}
{{- define "omnistage.labels" -}}
helm.sh/chart: {{ include "omnistage.chart" .root }}
{{ include "omnistage.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
omnistage/role: {{ .role }}
{{- end }}

{{/*
omnistage.commonLabels label objects that belong to no one component (the
ConfigMap, the Secret, the NetworkPolicy).
*/}}
{{- define "omnistage.commonLabels" -}}
helm.sh/chart: {{ include "omnistage.chart" . }}
app.kubernetes.io/name: {{ include "omnistage.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
omnistage.config is .Values.config decoded, as JSON (numbers come back as
floats: convert them with int). It fails the render when config is not YAML
or lacks a list of stages, or when a deploy entry places a stage remotely:
the chart runs every stage on stage servers of its own.
*/}}
{{- define "omnistage.config" -}}
{{- $cfg := .Values.config | fromYaml }}
{{- if hasKey $cfg "Error" }}
{{- fail (printf "config: not YAML: %s" $cfg.Error) }}
{{- end }}
{{- if not (kindIs "map" $cfg.pipeline) }}
{{- fail "config: needs a pipeline section (the pipeline the stage servers run)" }}
{{- end }}
{{- if not (kindIs "slice" $cfg.pipeline.stages) }}
{{- fail "config: pipeline.stages must be a list of stages" }}
{{- end }}
{{- if kindIs "map" $cfg.deploy }}
{{- range $cfg.deploy.stages }}
{{- if eq (toString .placement) "remote" }}
{{- fail (printf "config: deploy.stages: stage %v has placement remote; the chart runs each stage on stage servers of its own, so their config places it inproc or process" .id) }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $cfg }}
{{- end }}

{{/*
omnistage.stages lists every stage of the pipeline, the aligner included,
as JSON {"stages": [{"id", "name", "host", "component", "onRoute",
"settings"}]}: host is the name of the stage's Deployment, Service and so on
("<fullname>-<name>", lower case, '_' and '.' made '-'), component its pods'
app.kubernetes.io/component ("stage-<name>"), onRoute whether the route runs it (only
those get stage servers), settings stageDefaults with the stage's entry of
stages merged over them one level deep.
*/}}
{{- define "omnistage.stages" -}}
{{- $cfg := include "omnistage.config" . | fromJson }}
{{- $p := $cfg.pipeline }}
{{- $explicit := and (hasKey $p "stage_transitions") (not (kindIs "invalid" $p.stage_transitions)) }}
{{- $routed := dict "0" true }}
{{- if $explicit }}
{{- range $p.stage_transitions }}
{{- range . }}
{{- $_ := set $routed (toString (int .)) true }}
{{- end }}
{{- end }}
{{- end }}
{{- $all := list }}
{{- range $i, $s := $p.stages }}
{{- $all = append $all (dict "id" $i "name" (toString $s.name) "onRoute" (or (not $explicit) (hasKey $routed (toString $i)))) }}
{{- end }}
{{- if kindIs "map" $p.aligner }}
{{- $all = append $all (dict "id" (len $p.stages) "name" (toString ($p.aligner.name | default "aligner")) "onRoute" true) }}
{{- end }}
{{- $fullname := include "omnistage.fullname" . }}
{{- $perStage := .Values.stages | default (dict) }}
{{- $hosts := dict }}
{{- range $all }}
{{- $slug := .name | lower | replace "_" "-" | replace "." "-" }}
{{- $host := printf "%s-%s" $fullname $slug | trunc 63 | trimSuffix "-" }}
{{- if hasKey $hosts $host }}
{{- fail (printf "stages %s and %s both get the object name %s: rename one" (get $hosts $host) .name $host) }}
{{- end }}
{{- $_ := set $hosts $host .name }}
{{- $_ = set . "host" $host }}
{{- $_ = set . "component" (printf "stage-%s" $slug | trunc 63 | trimSuffix "-") }}
{{- $settings := deepCopy ($.Values.stageDefaults | default (dict)) }}
{{- range $k, $v := (get $perStage .name | default (dict)) }}
{{- if and (kindIs "map" $v) (kindIs "map" (get $settings $k)) }}
{{- $m := get $settings $k }}
{{- range $k2, $v2 := $v }}
{{- $_ := set $m $k2 $v2 }}
{{- end }}
{{- else }}
{{- $_ := set $settings $k $v }}
{{- end }}
{{- end }}
{{- $_ = set . "settings" $settings }}
{{- end }}
{{- toJson (dict "stages" $all) }}
{{- end }}

{{/*
omnistage.keyFile is where every pod finds a key: (dict "key" "payload") or
"api".
*/}}
{{- define "omnistage.keyFile" -}}
/etc/omnistage/keys/{{ .key }}-key
{{- end }}

{{/*
omnistage.keySecret is the name of the Secret holding a key: its
existingSecret, or the chart's "<fullname>-keys". Takes (dict "root" $ "key"
"payload") or "api".
*/}}
{{- define "omnistage.keySecret" -}}
{{- $k := get .root.Values.keys .key }}
{{- if $k.existingSecret }}
{{- $k.existingSecret }}
{{- else }}
{{- include "omnistage.fullname" .root }}-keys
{{- end }}
{{- end }}

{{/*
omnistage.stageConfig is the stage servers' config file: config as given,
without trailing white space (as the ConfigMap holds it, so that a pod's
checksum/config is the sha256 of the very file it reads).
omnistage.frontendConfig is the front end's: the same pipeline, the deploy
keys of config and frontend.deploy, and every stage on the route placement
remote at its headless Service (one replica per ready pod), with the API key
the stage servers require; a stage the route skips keeps its entry of
config and runs in the front end's process.
*/}}
{{- define "omnistage.stageConfig" -}}
{{- regexReplaceAll "\\s+$" .Values.config "" }}
{{- end }}

{{- define "omnistage.frontendConfig" -}}
{{- $cfg := include "omnistage.config" . | fromJson }}
{{- $src := $cfg.deploy | default (dict) }}
{{- $deploy := dict }}
{{- range $k, $v := $src }}
{{- if ne $k "stages" }}
{{- $_ := set $deploy $k $v }}
{{- end }}
{{- end }}
{{- range $k, $v := .Values.frontend.deploy }}
{{- $_ := set $deploy $k $v }}
{{- end }}
{{- $entries := list }}
{{- range $st := (include "omnistage.stages" . | fromJson).stages }}
{{- if $st.onRoute }}
{{- $e := deepCopy ($st.settings.remote | default (dict)) }}
{{- $url := printf "http://%s.%s.svc.%s:%d" $st.host $.Release.Namespace $.Values.clusterDomain (int $.Values.port) }}
{{- $_ := set $e "id" (int $st.id) }}
{{- $_ = set $e "placement" "remote" }}
{{- $_ = set $e "endpoints" (list $url) }}
{{- $_ = set $e "api_key_file" (include "omnistage.keyFile" (dict "key" "api")) }}
{{- $entries = append $entries $e }}
{{- else }}
{{- range ($src.stages | default list) }}
{{- if eq (int .id) (int $st.id) }}
{{- $entries = append $entries . }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $_ := set $deploy "stages" $entries }}
{{- printf "pipeline:\n%s\ndeploy:\n%s" (toYaml $cfg.pipeline | indent 2) (toYaml $deploy | indent 2) }}
{{- end }}

{{/*
omnistage.deployment is a server's Deployment, the front end's or a
stage's. Takes (dict "root" $ "name" N "component" C "role" R "settings" S
"args" A "config" CONFIG), where settings holds replicas, resources,
nodeSelector, tolerations, affinity, topologySpreadConstraints,
podAnnotations, podLabels, extraArgs and autoscaling, and config the text of
the config file the server reads (its checksum rolls the pods when it
changes).
*/}}
{{- define "omnistage.deployment" -}}
{{- $root := .root }}
{{- $s := .settings }}
{{- $name := .name }}
{{- $sel := dict "root" $root "component" .component "role" .role }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  labels:
    {{- include "omnistage.labels" $sel | nindent 4 }}
spec:
  {{- if not (and $s.autoscaling $s.autoscaling.enabled) }}
  replicas: {{ int $s.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "omnistage.selectorLabels" $sel | nindent 6 }}
  template:
    metadata:
      annotations:
        checksum/config: {{ .config | sha256sum }}
        {{- with $s.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      labels:
        {{- include "omnistage.labels" $sel | nindent 8 }}
        {{- with $s.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- range . }}
        - name: {{ . }}
        {{- end }}
      {{- end }}
      automountServiceAccountToken: false
      enableServiceLinks: false
      terminationGracePeriodSeconds: {{ int $root.Values.terminationGracePeriodSeconds }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      containers:
        - name: omnistage
          image: "{{ $root.Values.image.repository }}:{{ $root.Values.image.tag | default $root.Chart.AppVersion }}"
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            {{- range .args }}
            - {{ . | quote }}
            {{- end }}
            - "--addr"
            - {{ printf "0.0.0.0:%d" (int $root.Values.port) | quote }}
            {{- if $root.Values.keys.payloadAccepted.existingSecret }}
            - "--payload-key-file"
            - {{ include "omnistage.keyFile" (dict "key" "payload-accepted") | quote }}
            {{- end }}
            {{- /* the last key file given signs */}}
            - "--payload-key-file"
            - {{ include "omnistage.keyFile" (dict "key" "payload") | quote }}
            - "--api-key-file"
            - {{ include "omnistage.keyFile" (dict "key" "api") | quote }}
            - "--shutdown-timeout"
            - {{ $root.Values.shutdownTimeout | quote }}
            - "--log-level"
            - {{ $root.Values.logLevel | quote }}
            {{- range $s.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          {{- with $root.Values.tracing }}
          {{- if .otlpEndpoint }}
          env:
            - name: OTEL_EXPORTER_OTLP_ENDPOINT
              value: {{ .otlpEndpoint | quote }}
            - name: OTEL_SERVICE_NAME
              value: {{ $name | quote }}
            {{- if .sampler }}
            - name: OTEL_TRACES_SAMPLER
              value: {{ .sampler | quote }}
            {{- end }}
            {{- if .samplerArg }}
            - name: OTEL_TRACES_SAMPLER_ARG
              value: {{ .samplerArg | quote }}
            {{- end }}
          {{- end }}
          {{- end }}
          ports:
            - name: http
              containerPort: {{ int $root.Values.port }}
              protocol: TCP
          readinessProbe:
            httpGet:
              path: /ready
              port: http
            {{- toYaml $root.Values.probes.readiness | nindent 12 }}
          livenessProbe:
            httpGet:
              path: /health
              port: http
            {{- toYaml $root.Values.probes.liveness | nindent 12 }}
          {{- with $s.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: config
              mountPath: /etc/omnistage/config
              readOnly: true
            - name: keys
              mountPath: /etc/omnistage/keys
              readOnly: true
            - name: tmp
              mountPath: /tmp
      volumes:
        - name: config
          configMap:
            name: {{ include "omnistage.fullname" $root }}-config
        - name: keys
          projected:
            defaultMode: 0440
            sources:
              {{- range $key := list "payload" "api" }}
              - secret:
                  name: {{ include "omnistage.keySecret" (dict "root" $root "key" $key) }}
                  items:
                    - key: {{ (get $root.Values.keys $key).secretKey }}
                      path: {{ $key }}-key
              {{- end }}
              {{- with $root.Values.keys.payloadAccepted }}
              {{- if .existingSecret }}
              - secret:
                  name: {{ .existingSecret }}
                  items:
                    - key: {{ .secretKey }}
                      path: payload-accepted-key
              {{- end }}
              {{- end }}
        - name: tmp
          emptyDir:
            sizeLimit: {{ $root.Values.tmpSizeLimit }}
      {{- with $s.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $s.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $s.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $s.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}

{{/*
omnistage.pdb is a PodDisruptionBudget for one component. Takes (dict
"root" $ "name" N "component" C "role" R "pdb" P).
*/}}
{{- define "omnistage.pdb" -}}
{{- $sel := dict "root" .root "component" .component "role" .role }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  labels:
    {{- include "omnistage.labels" $sel | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" .pdb.minAvailable) }}
  minAvailable: {{ .pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ if kindIs "invalid" .pdb.maxUnavailable }}1{{ else }}{{ .pdb.maxUnavailable }}{{ end }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "omnistage.selectorLabels" $sel | nindent 6 }}
{{- end }}
