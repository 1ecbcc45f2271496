package ocrtest

// The text the test images show.

// englishLines are short lines, one to an image line: words, numbers,
// punctuation, mixed case.
var englishLines = []string{
	"The quick brown fox jumps over the lazy dog.",
	"Invoice 2024-0117: three boxes of paper at $42.50 each",
	"Platform 9 departs at 14:35 for Manchester Piccadilly",
	"Keep this door closed at all times",
	"Total due by March 31: 1,284.06 EUR",
	"Please call extension 4471 for help",
	"Fresh bread baked every morning",
	"Turn left at the second traffic light",
	"Order #A-5582 shipped on Tuesday",
	"No parking between 8am and 6pm",
	"Wash hands before returning to work",
	"Room 214, second floor, east wing",
	"Battery level low: connect the charger",
	"Best before 12/08/2026",
	"Visitors must sign in at reception",
	"Meeting moved to Thursday afternoon",
}

// englishParagraphs are prose, wrapped into lines when drawn.
var englishParagraphs = []string{
	"Small gardens reward patience. Seeds sown in early spring need steady water and a little shade, " +
		"and most of them will show their first leaves within two weeks. Thin the rows once the plants " +
		"are a few inches tall, and keep the soil loose so the roots can breathe.",
	"The library will close for repairs from June 3 to June 17. During that time, books may be returned " +
		"to the drop box by the main entrance, and reserved items can be collected at the community centre " +
		"on Elm Street between 10 and 4 on weekdays.",
	"Our train left the station just after dawn. Fog lay over the fields, and the only sounds were the " +
		"wheels on the rails and a conductor checking tickets two cars ahead. By nine the sun had burned " +
		"through, and the hills turned green and gold.",
	"To reset the device, hold the power button for ten seconds until the light blinks twice. Release it, " +
		"wait for the light to turn solid blue, and then pair it again from the settings menu of your phone.",
}

// chineseLines are lines of Simplified Chinese, with some digits and
// full-width punctuation.
var chineseLines = []string{
	"今天天气很好，我们去公园散步。",
	"请在下午三点之前提交报告。",
	"这家餐厅的饺子非常好吃。",
	"火车将于八点十五分到达北京站。",
	"图书馆周一至周五开放，周末休息。",
	"我们的会议改到明天上午十点。",
	"苹果每公斤12元，买两公斤打九折。",
	"学习一门新的语言需要耐心和坚持。",
	"春天来了，山上的花都开了。",
	"请保持安静，孩子们正在睡觉。",
	"这本书讲述了一个关于友谊的故事。",
	"地铁二号线今天停运维修。",
	"他每天早上六点起床跑步。",
	"欢迎来到上海国际会展中心。",
	"注意安全，小心地滑。",
	"电话号码是010-6253-8899。",
}
