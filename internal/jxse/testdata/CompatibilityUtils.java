// A stand-in for JXSE 2.7's net.jxta.impl.peergroup.CompatibilityUtils,
// placed before the JXSE jar on a live peer's class path. JXSE's own
// compares the module compatibility statement's "Efmt" with the version
// of the java.lang package, which Java 9 and later no longer report, so
// JXSE 2.7 cannot start its peer groups on Java 17. This one accepts any
// JRE/JDK format and the "V2.0 Ref Impl" binding. Written for p2pmsg's
// tests from the class's public signatures, not from its sources.
package net.jxta.impl.peergroup;

import java.util.Enumeration;

import net.jxta.document.Element;
import net.jxta.document.MimeMediaType;
import net.jxta.document.StructuredDocumentFactory;
import net.jxta.document.TextElement;
import net.jxta.document.XMLDocument;
import net.jxta.document.AdvertisementFactory;
import net.jxta.platform.ModuleSpecID;
import net.jxta.protocol.ModuleImplAdvertisement;

public final class CompatibilityUtils {
    private static final String FORMAT = "Efmt";
    private static final String FORMAT_VALUE = "JRE1.5";
    private static final String BINDING = "Bind";
    private static final String BINDING_VALUE = "V2.0 Ref Impl";

    private CompatibilityUtils() {
    }

    public static ModuleImplAdvertisement createModuleImplAdvertisement(ModuleSpecID msid, String code, String description) {
        ModuleImplAdvertisement adv = (ModuleImplAdvertisement) AdvertisementFactory.newAdvertisement(ModuleImplAdvertisement.getAdvertisementType());
        adv.setModuleSpecID(msid);
        adv.setCompat(createDefaultCompatStatement());
        adv.setCode(code);
        adv.setUri("http://download.java.net/jxta/jxta-jxse/latest/jnlp/lib/jxta.jar");
        adv.setProvider("sun.com");
        adv.setDescription(description);
        return adv;
    }

    public static XMLDocument createDefaultCompatStatement() {
        XMLDocument doc = (XMLDocument) StructuredDocumentFactory.newStructuredDocument(MimeMediaType.XMLUTF8, "Comp");
        doc.appendChild(doc.createElement(FORMAT, FORMAT_VALUE));
        doc.appendChild(doc.createElement(BINDING, BINDING_VALUE));
        return doc;
    }

    public static boolean isCompatible(Element compat) {
        boolean format = false, binding = false;
        try {
            Enumeration<?> kids = ((TextElement<?>) compat).getChildren();
            while (kids.hasMoreElements()) {
                TextElement<?> e = (TextElement<?>) kids.nextElement();
                String key = e.getKey(), value = e.getValue().trim();
                if (FORMAT.equals(key)) {
                    format = value.startsWith("JDK") || value.startsWith("JRE");
                } else if (BINDING.equals(key)) {
                    binding = BINDING_VALUE.equals(value);
                } else {
                    return false;
                }
            }
        } catch (RuntimeException e) {
            return false;
        }
        return format && binding;
    }
}
