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
omnistage.slug makes a pipeline's or a stage's name fit object names: lower
case, '_' and '.' made '-'.
*/}}
{{- define "omnistage.slug" -}}
{{- . | lower | replace "_" "-" | replace "." "-" }}
{{- end }}

{{/*
omnistage.decodeConfig is one pipeline's config text decoded, as JSON
(numbers come back as floats: convert them with int). Takes (dict "text" T
"field" F), F naming the value in messages. It fails the render when the
text is not YAML, holds several YAML documents, lacks a pipeline name or a
list of stages, or places a stage remotely: the chart runs every stage on
stage servers of its own.
*/}}
{{- define "omnistage.decodeConfig" -}}
{{- $docs := 0 }}
{{- range regexSplit "(?m)^---[ \\t]*$" .text -1 }}
{{- if regexMatch "(?m)^[ \\t]*[^#\\s]" . }}
{{- $docs = add1 $docs }}
{{- end }}
{{- end }}
{{- if gt $docs 1 }}
{{- fail (printf "%s: holds %d YAML documents; give each pipeline an entry of pipelines" .field $docs) }}
{{- end }}
{{- $cfg := .text | fromYaml }}
{{- if hasKey $cfg "Error" }}
{{- fail (printf "%s: not YAML: %s" .field $cfg.Error) }}
{{- end }}
{{- if not (kindIs "map" $cfg.pipeline) }}
{{- fail (printf "%s: needs a pipeline section (the pipeline the stage servers run)" .field) }}
{{- end }}
{{- if not $cfg.pipeline.name }}
{{- fail (printf "%s: pipeline.name is missing (requests pick a pipeline by its name)" .field) }}
{{- end }}
{{- if not (kindIs "slice" $cfg.pipeline.stages) }}
{{- fail (printf "%s: pipeline.stages must be a list of stages" .field) }}
{{- end }}
{{- if kindIs "map" $cfg.deploy }}
{{- range $cfg.deploy.stages }}
{{- if eq (toString .placement) "remote" }}
{{- fail (printf "%s: deploy.stages: stage %v has placement remote; the chart runs each stage on stage servers of its own, so their config places it inproc or process" $.field .id) }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $cfg }}
{{- end }}

{{/*
omnistage.pipelines lists the pipelines the release serves, as JSON
{"pipelines": [{"name", "cfg", "text", "field", "stageFile",
"frontendFile", "stages"}]}: the entries of pipelines in the order of their
names or, when pipelines is empty, the one pipeline of config. name is the
pipeline's (what a request's model picks), cfg its config decoded, text its
config as the stage servers read it (without trailing white space, as the
ConfigMap holds it, so that a pod's checksum/config is the sha256 of the
very file it reads), stageFile and frontendFile the ConfigMap keys of the
stage servers' and the front end's config ("stage.yaml" and
"frontend.yaml" for config, "stage-<pipeline>.yaml" and
"frontend-<pipeline>.yaml" for an entry of pipelines).

stages lists every stage of the pipeline, the aligner included: {"id",
"name", "host", "component", "onRoute", "settings"}, where host is the name
of the stage's Deployment, Service and so on ("<fullname>-<stage>" for
config, "<fullname>-<pipeline>-<stage>" for an entry of pipelines; lower
case, '_' and '.' made '-'), component its pods' app.kubernetes.io/component
("stage-<stage>" or "stage-<pipeline>-<stage>"), onRoute whether the route
runs it (only those get stage servers), settings stageDefaults with the
stage's entry of stages, then of pipelines.<pipeline>.stages, merged over
them one level deep. It fails the render when two objects would get one
name, or an entry of pipelines.<pipeline>.stages names no stage.
*/}}
{{- define "omnistage.pipelines" -}}
{{- $sources := list }}
{{- range $name, $p := .Values.pipelines }}
{{- $p = $p | default dict }}
{{- $slug := include "omnistage.slug" $name }}
{{- $sources = append $sources (dict "name" $name "field" (printf "pipelines.%s" $name) "config" (toString ($p.config | default "")) "prefix" (printf "%s-" $slug) "files" (printf "-%s" $slug) "perStage" ($p.stages | default dict)) }}
{{- end }}
{{- if not $sources }}
{{- $sources = list (dict "name" "" "field" "" "config" (toString .Values.config) "prefix" "" "files" "" "perStage" dict) }}
{{- end }}
{{- $fullname := include "omnistage.fullname" . }}
{{- $global := .Values.stages | default dict }}
{{- $taken := dict }}
{{- $out := list }}
{{- range $src := $sources }}
{{- $configField := ternary (printf "%s.config" $src.field) "config" (ne $src.name "") }}
{{- $cfg := include "omnistage.decodeConfig" (dict "text" $src.config "field" $configField) | fromJson }}
{{- $p := $cfg.pipeline }}
{{- $name := toString $p.name }}
{{- if and $src.name (ne $src.name $name) }}
{{- fail (printf "%s: the pipeline is named %q, not %q: name its entry of pipelines after it" $configField $name $src.name) }}
{{- end }}
{{- $files := printf "stage%s.yaml" $src.files }}
{{- if hasKey $taken $files }}
{{- fail (printf "%s and %s both get the config file %s: rename one" (get $taken $files) $src.field $files) }}
{{- end }}
{{- $_ := set $taken $files $src.field }}
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
{{- $known := list }}
{{- range $all }}{{ $known = append $known .name }}{{ end }}
{{- range $stage, $_ := $src.perStage }}
{{- if not (has $stage $known) }}
{{- fail (printf "%s.stages.%s: pipeline %s has no stage %s (its stages: %s)" $src.field $stage $name $stage (join ", " $known)) }}
{{- end }}
{{- end }}
{{- range $all }}
{{- $slug := include "omnistage.slug" .name }}
{{- $what := ternary (printf "stage %s of pipeline %s" .name $name) (printf "stage %s" .name) (ne $src.name "") }}
{{- $host := printf "%s-%s%s" $fullname $src.prefix $slug | trunc 63 | trimSuffix "-" }}
{{- $component := printf "stage-%s%s" $src.prefix $slug | trunc 63 | trimSuffix "-" }}
{{- range $key := list (printf "name %s" $host) (printf "component label %s" $component) }}
{{- if hasKey $taken $key }}
{{- fail (printf "%s and %s both get the object %s: rename one" (get $taken $key) $what $key) }}
{{- end }}
{{- $_ := set $taken $key $what }}
{{- end }}
{{- $_ := set . "host" $host }}
{{- $_ = set . "component" $component }}
{{- $layers := list (get $global .name) (get $src.perStage .name) }}
{{- $_ = set . "settings" (include "omnistage.stageSettings" (dict "root" $ "layers" $layers) | fromJson) }}
{{- end }}
{{- $out = append $out (dict "name" $name "cfg" $cfg "text" (regexReplaceAll "\\s+$" $src.config "") "field" $configField "stageFile" $files "frontendFile" (printf "frontend%s.yaml" $src.files) "stages" $all) }}
{{- end }}
{{- toJson (dict "pipelines" $out) }}
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
omnistage.stageSettings is stageDefaults with each of layers (settings of
a stage, or null) merged over it in turn, one level deep, as JSON. Takes
(dict "root" $ "layers" L).
*/}}
{{- define "omnistage.stageSettings" -}}
{{- $settings := deepCopy (.root.Values.stageDefaults | default dict) }}
{{- range $layer := .layers }}
{{- range $k, $v := ($layer | default dict) }}
{{- if and (kindIs "map" $v) (kindIs "map" (get $settings $k)) }}
{{- $m := get $settings $k }}
{{- range $k2, $v2 := $v }}
{{- $_ := set $m $k2 $v2 }}
{{- end }}
{{- else }}
{{- $_ := set $settings $k $v }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $settings }}
{{- end }}

{{/*
omnistage.frontendConfig is the front end's config file for one pipeline:
the same pipeline, the deploy keys of its config and frontend.deploy, and
every stage on the route placement remote at its headless Service (one
replica per ready pod), with the API key the stage servers require; a stage
the route skips keeps its entry of the config and runs in the front end's
process. Takes (dict "root" $ "pipeline" P), P an entry of
omnistage.pipelines.
*/}}
{{- define "omnistage.frontendConfig" -}}
{{- $root := .root }}
{{- $cfg := .pipeline.cfg }}
{{- $src := $cfg.deploy | default (dict) }}
{{- $deploy := dict }}
{{- range $k, $v := $src }}
{{- if ne $k "stages" }}
{{- $_ := set $deploy $k $v }}
{{- end }}
{{- end }}
{{- range $k, $v := $root.Values.frontend.deploy }}
{{- $_ := set $deploy $k $v }}
{{- end }}
{{- $entries := list }}
{{- range $st := .pipeline.stages }}
{{- if $st.onRoute }}
{{- $e := deepCopy ($st.settings.remote | default (dict)) }}
{{- $url := printf "http://%s.%s.svc.%s:%d" $st.host $root.Release.Namespace $root.Values.clusterDomain (int $root.Values.port) }}
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
omnistage.requireKubeVersion fails the render for a Kubernetes older than
1.25 whenever the version is the cluster's or one given with
--kube-version. Helm fills .Capabilities.KubeVersion from the cluster on
an install or an upgrade (--dry-run included); `helm template` and `helm
lint` without --kube-version report Helm's built-in default instead, v1.20.0
(Chart.yaml's kubeVersion would refuse that, so the chart has none). A
v1.20.0 is taken for that default unless lookup, which answers nothing
without a cluster, lists the release namespace's Services: only a cluster
that really reports v1.20.0 costs that call.
*/}}
{{- define "omnistage.requireKubeVersion" -}}
{{- $v := .Capabilities.KubeVersion.Version }}
{{- if semverCompare "<1.25.0-0" $v }}
{{- if or (ne $v "v1.20.0") (lookup "v1" "Service" .Release.Namespace "") }}
{{- fail (printf "omnistage needs Kubernetes 1.25 or newer; this is %s" $v) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
omnistage.deployment is a server's Deployment, the front end's or a
stage's. Takes (dict "root" $ "name" N "component" C "role" R "settings" S
"args" A "config" CONFIG), where settings holds replicas, resources,
goMemLimit, nodeSelector, tolerations, affinity, topologySpreadConstraints,
podAnnotations, podLabels, extraArgs and autoscaling, and config the text of
the config files the server reads (its checksum rolls the pods when it
changes). GOMEMLIMIT is goMemLimit when set, else derived from the
container's memory limit when it has one, else unset.
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
            - "--allowed-hosts"
            - {{ .hosts | quote }}
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
          {{- $tracing := $root.Values.tracing | default dict }}
          {{- $memory := "" }}
          {{- with $s.resources }}{{ with .limits }}{{ $memory = toString (.memory | default "") }}{{ end }}{{ end }}
          {{- $goMemLimit := toString ($s.goMemLimit | default "") }}
          {{- if or $goMemLimit $memory $tracing.otlpEndpoint }}
          env:
            {{- if $goMemLimit }}
            - name: GOMEMLIMIT
              value: {{ $goMemLimit | quote }}
            {{- else if $memory }}
            {{- /*
            The memory limit in MiB (rounded up), written as that many
            million bytes: GOMEMLIMIT at 10^6/2^20 = 95.4% of the limit the
            container really has. The Downward API does no arithmetic; this
            unit change is its margin.
            */}}
            - name: OMNISTAGE_MEMORY_LIMIT_MIB
              valueFrom:
                resourceFieldRef:
                  containerName: omnistage
                  resource: limits.memory
                  divisor: 1Mi
            - name: GOMEMLIMIT
              value: "$(OMNISTAGE_MEMORY_LIMIT_MIB)000000"
            {{- end }}
            {{- with $tracing }}
            {{- if .otlpEndpoint }}
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

{{- /*
omnistage.serviceHosts: the names a pod is called by through the Service
.name, comma-separated (serve --allowed-hosts): the short name, with the
namespace, with .svc, and the whole cluster name.
*/}}
{{- define "omnistage.serviceHosts" -}}
{{- $ns := .root.Release.Namespace -}}
{{- join "," (list .name (printf "%s.%s" .name $ns) (printf "%s.%s.svc" .name $ns) (printf "%s.%s.svc.%s" .name $ns .root.Values.clusterDomain)) -}}
{{- end }}
