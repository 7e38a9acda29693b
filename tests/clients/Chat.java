// One chat call with the JDK's own HttpClient (Java 11+), run without a build: java Chat.java "Say hi"
// The proxy and the truststore come from JAVA_TOOL_OPTIONS: eval "$(semula env --format java)".
// The JVM sends no proxy user name, so the project travels in the x-semula-project header (SEMULA_PROJECT).
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class Chat {
    public static void main(String[] args) throws Exception {
        String prompt = args.length > 0 ? args[0] : "Say hi";
        String body = "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\""
                + prompt.replace("\\", "\\\\").replace("\"", "\\\"") + "\"}]}";
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create("https://api.openai.com/v1/chat/completions"))
                .header("content-type", "application/json")
                .header("authorization", "Bearer " + System.getenv("OPENAI_API_KEY"))
                .POST(HttpRequest.BodyPublishers.ofString(body));
        String project = System.getenv("SEMULA_PROJECT");
        if (project != null && !project.isEmpty()) {
            request.header("x-semula-project", project);
        }
        // newHttpClient() uses the default ProxySelector, which reads https.proxyHost/https.proxyPort.
        HttpResponse<String> response = HttpClient.newHttpClient().send(request.build(),
                HttpResponse.BodyHandlers.ofString());
        System.err.println("status " + response.statusCode() + " · x-semula-decision: "
                + response.headers().firstValue("x-semula-decision").orElse("(none: semula not in the path)"));
        System.out.println(response.body());
    }
}
