#include "serving/calibration.h"

namespace bertrt::serving {

// Written for bertrt: short and long, questions and statements, product
// text, news, code and numbers, in the languages BERT-family models are
// fine-tuned on most (English, Chinese, German, French, Spanish, Japanese,
// Russian, Portuguese, Italian, Arabic, Korean, Hindi). What matters for
// calibration is that the activations see the ranges real text gives them;
// a model's own domain is better still (--calibrate FILE).
const std::vector<std::string>& BuiltInCalibrationTexts() {
  static const std::vector<std::string> texts = {
      "How do I reset my password if I no longer have access to my email?",
      "The quarterly report shows revenue up 12% year over year, driven by cloud services.",
      "Preheat the oven to 180 degrees, then bake the bread for 35 minutes until golden.",
      "What is the capital of Australia?",
      "Canberra was chosen as the capital in 1908 as a compromise between Sydney and Melbourne.",
      "The battery lasts about two days with normal use, but the camera is disappointing in low "
      "light.",
      "Error: connection refused (errno 111) while connecting to db-primary:5432.",
      "def mean(xs): return sum(xs) / len(xs) if xs else 0.0",
      "I loved this movie! The acting was superb and the soundtrack stayed with me for days.",
      "Terrible service. We waited an hour and the food arrived cold.",
      "Photosynthesis converts light energy into chemical energy stored in glucose.",
      "Can you recommend a good hiking trail near Zurich that takes less than three hours?",
      "The central bank kept interest rates unchanged at 4.25 percent on Thursday.",
      "Please find attached the signed contract and the invoice for March.",
      "Who wrote the novel One Hundred Years of Solitude?",
      "Gabriel Garcia Marquez published One Hundred Years of Solitude in 1967; it follows seven "
      "generations of the Buendia family in the town of Macondo.",
      "Symptoms include fever, dry cough and fatigue; most patients recover within two weeks.",
      "The new firmware update fixes the Bluetooth pairing issue on Android 14 devices.",
      "ok",
      "Thanks!",
      "The committee will meet again next Tuesday to review the remaining 37 applications, and "
      "a final decision is expected before the end of the month, according to a spokesperson "
      "who declined to comment on individual candidates.",
      "SELECT name, COUNT(*) FROM orders WHERE created_at > '2024-01-01' GROUP BY name;",
      "Is it safe to take ibuprofen together with paracetamol?",
      "Our team is hiring a senior backend engineer with experience in distributed systems.",
      "The match ended 2-1 after a late penalty in the 89th minute.",
      "这款手机的电池续航非常好，但是拍照效果一般。",
      "请问从北京到上海的高铁需要多长时间？",
      "今天天气晴朗，适合去公园散步。",
      "人工智能正在改变医疗、金融和教育等多个行业。",
      "我想退货，因为收到的商品与描述不符。",
      "公司第三季度营业收入同比增长百分之十五，净利润创历史新高。",
      "长城是中国古代的军事防御工程，全长超过两万公里。",
      "这家餐厅的服务态度很差，菜也不新鲜。",
      "Wie komme ich am schnellsten vom Hauptbahnhof zum Flughafen?",
      "Die Lieferung kam zwei Tage zu spät, aber die Qualität ist ausgezeichnet.",
      "Die Bundesregierung hat ein neues Klimaschutzgesetz verabschiedet.",
      "Quelle est la meilleure période pour visiter la Provence ?",
      "Le produit fonctionne parfaitement, je le recommande vivement.",
      "La réunion a été reportée à jeudi prochain en raison de la grève des transports.",
      "¿Dónde puedo encontrar una farmacia abierta las 24 horas?",
      "El servicio al cliente fue excelente y resolvieron mi problema en minutos.",
      "Las lluvias torrenciales provocaron inundaciones en varias regiones del sur.",
      "東京から大阪まで新幹線でどのくらいかかりますか？",
      "この商品はとても使いやすくて、デザインも素敵です。",
      "明日の会議は午後三時から始まります。",
      "Как доехать до Красной площади на метро?",
      "Доставка была быстрой, но упаковка оказалась повреждённой.",
      "Учёные обнаружили новый вид бабочек в тропических лесах Амазонии.",
      "Qual é o horário de funcionamento do museu aos domingos?",
      "O aplicativo trava toda vez que tento fazer login.",
      "Il treno per Milano partirà con un ritardo di venti minuti.",
      "Questo ristorante offre la migliore pizza napoletana della città.",
      "ما هي أفضل طريقة لتعلم اللغة الإنجليزية بسرعة؟",
      "كانت الخدمة ممتازة والطعام لذيذا جدا.",
      "서울에서 부산까지 기차로 얼마나 걸리나요?",
      "이 제품은 가격 대비 품질이 아주 좋습니다.",
      "मुझे दिल्ली से मुंबई के लिए सबसे सस्ती उड़ान कौन सी मिलेगी?",
      "यह फ़ोन बहुत तेज़ है और इसकी बैटरी भी अच्छी है।",
      "Machine learning models can overfit when the training data is small and noisy.",
      "The function returns None when the key is missing, so check before indexing.",
      "Apple, Microsoft and Nvidia together account for a fifth of the index's value.",
      "Mount Everest is 8,849 meters tall and lies on the border between Nepal and China.",
      "Why is the sky blue?",
      "Rayleigh scattering makes shorter blue wavelengths scatter more strongly than red ones, "
      "which is why the daytime sky looks blue to us.",
      "The hotel room was clean and spacious, with a beautiful view of the harbor.",
      "I have been charged twice for the same order, please refund the duplicate payment.",
      "Section 4.2 of the agreement states that either party may terminate with 30 days notice.",
      "Traffic on the A1 motorway is backed up for 12 kilometers after an accident near Bern.",
      "The patient was prescribed 500 mg of amoxicillin three times a day for seven days.",
      "What time does the pharmacy close on Saturdays?",
      "The James Webb Space Telescope captured images of galaxies formed shortly after the Big "
      "Bang.",
      "Add two cups of flour, one teaspoon of salt and mix until smooth.",
      "How many calories are in a banana?",
      "The vote passed with 312 in favor, 98 against and 14 abstentions.",
      "Kubernetes restarts a container when its liveness probe fails three times in a row.",
      "The 2022 World Cup final between Argentina and France was decided on penalties.",
      "Our return policy allows exchanges within 30 days of purchase with the original receipt.",
      "Shares fell 8% in early trading after the company cut its annual forecast.",
      "She finished the marathon in 3 hours and 12 minutes, a personal best.",
      "Remember to back up your files before installing the new operating system.",
      "The museum's collection includes over 10,000 works of art from the 19th century.",
      "I am looking for a quiet place to work with fast wifi in the city center.",
      "Is there vegetarian food on the menu?",
      "The algorithm runs in O(n log n) time and uses O(n) additional memory.",
      "A magnitude 6.1 earthquake struck off the coast early on Monday; no tsunami warning was "
      "issued.",
      "The package was left at the front door but it was not there when I got home.",
      "Regular exercise lowers the risk of heart disease, diabetes and depression.",
      "Please confirm your attendance by replying to this email before Friday.",
      "The translation is accurate, but the formatting of the tables was lost.",
      "Renewable sources supplied more than half of the country's electricity last year.",
      "How do I convert a string to an integer in JavaScript?",
      "Use parseInt(value, 10) or Number(value); both return NaN when the text is not a number.",
  };
  return texts;
}

}  // namespace bertrt::serving
