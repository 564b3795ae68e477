// MsgOracle runs JXSE 2.7's binary wire format (WireFormatMessageBinary) for
// p2pmsg's interop tests. One request per stdin line, one answer per line.
//
//   MsgOracle encode   line = elements separated by ' '; an element is
//                      b64(ns).b64(name).b64(mime).b64(data)[.b64(signame).b64(sigmime).b64(sigdata)]
//                      (empty mime = application/octet-stream)
//                      answer = b64(the bytes JXSE writes)
//   MsgOracle decode   line = b64(wire bytes)
//                      answer = elements as above (mime as JXSE prints it), or "ERR reason"
//   MsgOracle mime     line = b64(mime string)
//                      answer = "OK b64(canonical) AOS|-" or "ERR reason"
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import net.jxta.document.MimeMediaType;
import net.jxta.endpoint.*;

public class MsgOracle {
    static final MimeMediaType WIRE = new MimeMediaType("application/x-jxta-msg");

    static String b64(byte[] b) { return Base64.getEncoder().encodeToString(b); }
    static String b64(String s) { return b64(s.getBytes(StandardCharsets.UTF_8)); }
    static byte[] unb64(String s) { return Base64.getDecoder().decode(s); }
    static String str(String s) { return new String(unb64(s), StandardCharsets.UTF_8); }

    static MimeMediaType mime(String s) { return s.isEmpty() ? null : new MimeMediaType(s); }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out), false, "US-ASCII");
        String mode = args[0];
        String line;
        while ((line = in.readLine()) != null) {
            try {
                switch (mode) {
                    case "encode": out.println(encode(line)); break;
                    case "decode": out.println(decode(line)); break;
                    case "mime": out.println(canon(line)); break;
                    default: throw new IllegalArgumentException("unknown mode " + mode);
                }
            } catch (Throwable t) {
                out.println("ERR " + t.toString().replace('\n', ' '));
            }
        }
        out.flush();
    }

    static String encode(String line) throws IOException {
        Message msg = new Message();
        if (!line.isEmpty()) {
            for (String el : line.split(" ")) {
                String[] f = el.split("\\.", -1);
                MessageElement sig = null;
                if (f.length == 7) {
                    sig = new ByteArrayMessageElement(str(f[4]), mime(str(f[5])), unb64(f[6]), null);
                }
                msg.addMessageElement(str(f[0]), new ByteArrayMessageElement(str(f[1]), mime(str(f[2])), unb64(f[3]), sig));
            }
        }
        ByteArrayOutputStream bos = new ByteArrayOutputStream();
        WireFormatMessageFactory.toWire(msg, WIRE, null).sendToStream(bos);
        return b64(bos.toByteArray());
    }

    static String element(String ns, MessageElement el) {
        StringBuilder sb = new StringBuilder();
        sb.append(b64(ns)).append('.').append(b64(el.getElementName())).append('.')
          .append(b64(el.getMimeType().toString())).append('.').append(b64(el.getBytes(false)));
        MessageElement sig = el.getSignature();
        if (sig != null) {
            sb.append('.').append(b64(sig.getElementName())).append('.')
              .append(b64(sig.getMimeType().toString())).append('.').append(b64(sig.getBytes(false)));
        }
        return sb.toString();
    }

    static String decode(String line) throws IOException {
        Message msg = WireFormatMessageFactory.fromWire(new ByteArrayInputStream(unb64(line)), WIRE, null);
        StringBuilder sb = new StringBuilder();
        Message.ElementIterator it = msg.getMessageElements();
        while (it.hasNext()) {
            MessageElement el = it.next();
            if (sb.length() > 0) sb.append(' ');
            sb.append(element(it.getNamespace(), el));
        }
        return sb.toString();
    }

    static String canon(String line) {
        MimeMediaType m = new MimeMediaType(str(line));
        return "OK " + b64(m.toString()) + " " + (MimeMediaType.AOS.equals(m) ? "AOS" : "-");
    }
}
