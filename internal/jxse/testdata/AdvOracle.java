// AdvOracle runs JXSE 2.7's pipe advertisements for p2pmsg's interop tests.
// One request per stdin line, one answer per line; fields are base64, "-"
// stands for an unset value.
//
//   AdvOracle write   line = id type name desc     answer = b64(the XML JXSE writes)
//   AdvOracle parse   line = b64(xml)              answer = "OK id type name desc" or "ERR reason"
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import net.jxta.document.*;
import net.jxta.id.IDFactory;
import net.jxta.protocol.PipeAdvertisement;

public class AdvOracle {
    static String b64(String s) {
        return s == null ? "-" : Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
    }
    static String str(String s) {
        return s.equals("-") ? null : new String(Base64.getDecoder().decode(s), StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out), false, "US-ASCII");
        String line;
        while ((line = in.readLine()) != null) {
            try {
                switch (args[0]) {
                    case "write": out.println(write(line)); break;
                    case "parse": out.println(parse(line)); break;
                    default: throw new IllegalArgumentException("unknown mode " + args[0]);
                }
            } catch (Throwable t) {
                out.println("ERR " + t.toString().replace('\n', ' '));
            }
        }
        out.flush();
    }

    static String write(String line) throws Exception {
        String[] f = line.split(" ", -1);
        PipeAdvertisement adv = (PipeAdvertisement) AdvertisementFactory.newAdvertisement(PipeAdvertisement.getAdvertisementType());
        adv.setPipeID(IDFactory.fromURI(new java.net.URI(str(f[0]))));
        if (str(f[1]) != null) adv.setType(str(f[1]));
        if (str(f[2]) != null) adv.setName(str(f[2]));
        if (str(f[3]) != null) adv.setDescription(str(f[3]));
        ByteArrayOutputStream bos = new ByteArrayOutputStream();
        adv.getDocument(MimeMediaType.XMLUTF8).sendToStream(bos);
        return Base64.getEncoder().encodeToString(bos.toByteArray());
    }

    static String parse(String line) throws Exception {
        byte[] xml = Base64.getDecoder().decode(line);
        XMLElement doc = (XMLElement) StructuredDocumentFactory.newStructuredDocument(MimeMediaType.XMLUTF8, new ByteArrayInputStream(xml));
        PipeAdvertisement adv = (PipeAdvertisement) AdvertisementFactory.newAdvertisement(doc);
        return "OK " + b64(adv.getPipeID() == null ? null : adv.getPipeID().toString()) + " " + b64(adv.getType())
            + " " + b64(adv.getName()) + " " + b64(adv.getDescription());
    }
}
