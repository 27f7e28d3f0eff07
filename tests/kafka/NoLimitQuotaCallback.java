// A client quota callback (client.quota.callback.class) that keeps Kafka's quota buckets and enforces
// nothing: the broker stores every quota it is given, records each connection's usage under the
// metric tags Kafka's own DefaultQuotaCallback would give it (the precedence table of
// ClientQuotaManager.DefaultQuotaCallback.quotaMetricTags, from the entities that have a quota of
// the connection's type), and answers "no limit" for every bucket. A broker started with it is a
// broker that declares quotas and does not enforce them: what `kqplan apply --verify-enforcement`
// must call contradicted, and what `kqplan plan` must warn about (tests/metrics).
//
// Compiled by the metrics tests against the jars tests/kafka/pom.xml fetches (javac -cp 'LIBS/*').
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.utils.Sanitizer;
import org.apache.kafka.server.quota.ClientQuotaCallback;
import org.apache.kafka.server.quota.ClientQuotaEntity;
import org.apache.kafka.server.quota.ClientQuotaType;

public class NoLimitQuotaCallback implements ClientQuotaCallback {
    private static final String ABSENT = "~";
    private static final String DEFAULT = "*";
    // per quota type, the entities that have a quota of it: "<user part>\0<client-id part>", each
    // part "=name", DEFAULT or ABSENT
    private final Map<ClientQuotaType, Set<String>> quotas = new ConcurrentHashMap<>();

    @Override
    public void configure(Map<String, ?> configs) {}

    private static String entity(ClientQuotaEntity quotaEntity) {
        String user = ABSENT;
        String client = ABSENT;
        for (ClientQuotaEntity.ConfigEntity part : quotaEntity.configEntities()) {
            switch (part.entityType()) {
                case USER: user = "=" + part.name(); break;
                case DEFAULT_USER: user = DEFAULT; break;
                case CLIENT_ID: client = "=" + part.name(); break;
                case DEFAULT_CLIENT_ID: client = DEFAULT; break;
                default: break;
            }
        }
        return user + "\0" + client;
    }

    private boolean has(ClientQuotaType type, String user, String client) {
        return quotas.getOrDefault(type, Set.of()).contains(user + "\0" + client);
    }

    @Override
    public Map<String, String> quotaMetricTags(ClientQuotaType type, KafkaPrincipal principal, String clientId) {
        String user = "=" + principal.getName();
        String client = "=" + clientId;
        String tagUser = Sanitizer.sanitize(principal.getName());
        if (has(type, user, client) || has(type, user, DEFAULT)) return Map.of("user", tagUser, "client-id", clientId);
        if (has(type, user, ABSENT)) return Map.of("user", tagUser, "client-id", "");
        if (has(type, DEFAULT, client) || has(type, DEFAULT, DEFAULT)) return Map.of("user", tagUser, "client-id", clientId);
        if (has(type, DEFAULT, ABSENT)) return Map.of("user", tagUser, "client-id", "");
        return Map.of("user", "", "client-id", clientId);
    }

    @Override
    public Double quotaLimit(ClientQuotaType type, Map<String, String> metricTags) {
        return null;  // no limit: nothing is ever throttled
    }

    @Override
    public void updateQuota(ClientQuotaType type, ClientQuotaEntity quotaEntity, double newValue) {
        quotas.computeIfAbsent(type, t -> ConcurrentHashMap.newKeySet()).add(entity(quotaEntity));
    }

    @Override
    public void removeQuota(ClientQuotaType type, ClientQuotaEntity quotaEntity) {
        Set<String> entities = quotas.get(type);
        if (entities != null) entities.remove(entity(quotaEntity));
    }

    @Override
    public boolean quotaResetRequired(ClientQuotaType type) {
        return false;
    }

    @Override
    public boolean updateClusterMetadata(Cluster cluster) {
        return false;
    }

    @Override
    public void close() {}
}
