// The built-in text (see builtin_text.h): plain prose written for this project, about everyday
// things, so that any instruction-tuned or base model of a few hundred million parameters predicts
// it well; no code, no lists, no rare names.
#include "runtime/eval/builtin_text.h"

namespace conveyor {

const char* builtin_perplexity_text() {
  return "The small town by the river woke up slowly on Saturday mornings. The baker was always the first to "
         "open his door, and the smell of fresh bread drifted down the main street long before the sun had "
         "climbed over the hills. A few people walked their dogs along the water, and the ducks gathered near "
         "the old stone bridge, waiting for children to throw them crumbs.\n\n"
         "By eight o'clock the market square began to fill. Farmers from the nearby villages set up their "
         "tables and unloaded boxes of apples, potatoes, carrots and onions. In the spring they brought "
         "strawberries and flowers, in the summer tomatoes and sweet corn, and in the autumn pumpkins and "
         "baskets of mushrooms collected in the forest. Most of the customers knew the sellers by name, and "
         "many conversations started with the weather and ended with news about families, weddings and the "
         "price of fuel.\n\n"
         "The library opened at ten. It was a quiet building with tall windows and wooden shelves that reached "
         "almost to the ceiling. Students came to study for their exams, older readers came for the newspapers, "
         "and parents brought their young children to the reading corner, where a volunteer read stories aloud "
         "every week. The librarian liked to say that a town without a library was like a house without "
         "windows: you could live in it, but you would never see very far.\n\n"
         "In the afternoon the football field behind the school was busy with games. The local team was not "
         "very good, but the players were enthusiastic and the crowd was loyal. When they scored a goal, the "
         "whole field cheered as if they had won the national cup. After the match, players and fans walked "
         "together to the cafe on the corner, where the owner served hot chocolate in the winter and cold "
         "lemonade in the summer.\n\n"
         "As evening came, the streets grew quiet again. Lights appeared in the windows one by one, and the "
         "smell of cooking filled the air. Some families sat down to dinner together, while others watched "
         "television or talked on the phone with relatives who lived far away. The river kept flowing under "
         "the bridge, as it had for hundreds of years, carrying leaves and small branches toward the sea.\n\n"
         "Life in the town was simple, and not everyone liked it. Some young people left for the big cities, "
         "hoping to find better jobs and more excitement. Many of them came back years later, often with "
         "children of their own, because they missed the market, the library, the football field and the "
         "friendly faces. They said that the city had taught them a lot, but that the town had taught them "
         "what home means. On quiet evenings they would stand on the bridge, look at the water and remember "
         "the mornings when the smell of bread had woken them up.\n\n"
         "Every year, at the end of the summer, the town held a festival on the banks of the river. There was "
         "music, dancing and a long table where everyone shared the food they had cooked at home. When the "
         "night came, the children lit small paper lanterns and let them float down the river.\n";
}

}  // namespace conveyor
