// Kafka's own answer to "which bucket, and which limit": ClientQuotaManager (the broker's class,
// from the jars the test suite downloads) configured with quota entries, then asked for each
// connection's metric tags (the bucket its usage is recorded in) and quota limit.
//
// stdin, tab-separated, one case after another:
//   CASE
//   Q <user> <client-id> <value>   a quota entry; a part is a name, * (the default) or ~ (absent)
//   P <user> <client-id>           a connection (the client-id may be empty)
// stdout, one line per P: <user> <client-id> <user tag> <client-id tag> <limit or "unlimited">
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Quota;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.network.Session;
import org.apache.kafka.server.config.ClientQuotaManagerConfig;
import org.apache.kafka.server.quota.ClientQuotaEntity;
import org.apache.kafka.server.quota.ClientQuotaManager;
import org.apache.kafka.server.quota.ClientSensors;
import org.apache.kafka.server.quota.QuotaType;

public class QuotaBuckets {
    private static Optional<ClientQuotaEntity.ConfigEntity> user(String part) {
        if (part.equals("~")) return Optional.empty();
        return Optional.of(part.equals("*") ? ClientQuotaManager.DEFAULT_USER_ENTITY
                                            : new ClientQuotaManager.UserEntity(part));
    }

    private static Optional<ClientQuotaEntity.ConfigEntity> client(String part) {
        if (part.equals("~")) return Optional.empty();
        return Optional.of(part.equals("*") ? ClientQuotaManager.DEFAULT_USER_CLIENT_ID
                                            : new ClientQuotaManager.ClientIdEntity(part));
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        StringBuilder out = new StringBuilder();
        ClientQuotaManager manager = null;
        Metrics metrics = null;
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] f = line.split("\t", -1);
            if (f[0].equals("CASE")) {
                if (manager != null) { manager.shutdown(); metrics.close(); }
                metrics = new Metrics();
                manager = new ClientQuotaManager(new ClientQuotaManagerConfig(), metrics, QuotaType.PRODUCE,
                                                 Time.SYSTEM, "oracle");
            } else if (f[0].equals("Q")) {
                manager.updateQuota(user(f[1]), client(f[2]), Optional.of(Quota.upperBound(Double.parseDouble(f[3]))));
            } else if (f[0].equals("P")) {
                KafkaPrincipal principal = new KafkaPrincipal(KafkaPrincipal.USER_TYPE, f[1]);
                ClientSensors sensors = manager.getOrCreateQuotaSensors(
                    new Session(principal, InetAddress.getLoopbackAddress()), f[2]);
                Map<String, String> tags = sensors.metricTags();
                double limit = manager.quota(principal, f[2]).bound();
                String shown = limit >= Long.MAX_VALUE ? "unlimited" : Double.toString(limit);
                out.append(f[1]).append('\t').append(f[2]).append('\t')
                   .append(tags.getOrDefault(ClientQuotaManager.USER_TAG, "")).append('\t')
                   .append(tags.getOrDefault(ClientQuotaManager.CLIENT_ID_TAG, "")).append('\t')
                   .append(shown).append('\n');
            }
        }
        if (manager != null) { manager.shutdown(); metrics.close(); }
        System.out.print(out);
        System.out.flush();
        System.exit(0);
    }
}
